import { CONSUMERS, SERVICES } from '@threadwork/contracts';
import { bootService, consumeDomain, serveRoutes, startRuntime, type StartedService } from '@threadwork/platform';
import type { ReviewConfig } from './config.js';
import { createRepohostClient } from './clients/repohost.js';
import { createRunsClient } from './clients/runs.js';
import { createThreadsClient } from './clients/threads.js';
import { candidateRoutes, reviewRoutes, type ReviewDeps } from './handlers/review.js';
import { createSnapshotStore } from './store/snapshots.js';

export { ReviewConfig } from './config.js';

/** Durable name of review's DOMAIN consumer; replicas share it, so each event is stored by one. */
export const REVIEW_CONSUMER = CONSUMERS.review;

export async function startReview(config: ReviewConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'review', config, mongo: true });
  return bootService(runtime, async ({ db, nc, logger }) => {
    const store = createSnapshotStore(db);
    await store.ensureIndexes();
    const timeoutMs = config.PEER_TIMEOUT_MS;
    const deps: ReviewDeps = {
      store,
      runs: createRunsClient(nc, timeoutMs),
      threads: createThreadsClient(nc, timeoutMs),
      repohost: createRepohostClient(nc, timeoutMs),
      logger,
    };

    // Candidates and candidate failures only. Storing is idempotent (newer wins), so redeliveries are harmless.
    await consumeDomain(runtime, {
      durable: REVIEW_CONSUMER,
      events: candidateRoutes(deps),
      drainMs: config.SHUTDOWN_TIMEOUT_MS,
    });

    await serveRoutes(runtime, SERVICES.review, reviewRoutes(deps), config.SHUTDOWN_TIMEOUT_MS);
  });
}
