import { DOMAIN_STREAM, SERVICES } from '@threadwork/contracts';
import {
  bootService,
  consumeJson,
  ensureConsumer,
  ensureStream,
  serveRoutes,
  startRuntime,
  type StartedService,
} from '@threadwork/platform';
import type { ReviewConfig } from './config.js';
import { createEventHandler, REVIEW_DOMAIN_SUBJECTS, reviewRoutes } from './handlers/review.js';
import { createSnapshotStore } from './store/snapshots.js';

export { ReviewConfig } from './config.js';

/** Durable name of review's DOMAIN consumer; replicas share it, so each event is stored by one. */
export const REVIEW_CONSUMER = 'review';

export async function startReview(config: ReviewConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'review', config, mongo: true });
  return bootService(runtime, async ({ db, nc, js, jsm, logger, lifecycle }) => {
    const store = createSnapshotStore(db);
    await store.ensureIndexes();
    const deps = { nc, store, peerTimeoutMs: config.PEER_TIMEOUT_MS, logger };

    // DOMAIN keeps events a week (limits retention); this durable consumer sees candidates and
    // candidate failures only. Storing is idempotent (newer wins), so redeliveries are harmless.
    await ensureStream(jsm, DOMAIN_STREAM);
    await ensureConsumer(jsm, DOMAIN_STREAM.name, {
      durable_name: REVIEW_CONSUMER,
      filter_subjects: Object.values(REVIEW_DOMAIN_SUBJECTS),
    });
    const handle = createEventHandler(deps);
    const consumer = await consumeJson(
      js,
      { stream: DOMAIN_STREAM.name, durable: REVIEW_CONSUMER, logger },
      (payload, msg) => handle(msg.subject, payload),
    );
    lifecycle.add('domain-consumer', () => consumer.stop(config.SHUTDOWN_TIMEOUT_MS));

    await serveRoutes(runtime, SERVICES.review, reviewRoutes(deps), config.SHUTDOWN_TIMEOUT_MS);
  });
}
