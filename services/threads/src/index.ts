import { SERVICES } from '@threadwork/contracts';
import { bootService, consumeDomain, serveRoutes, startRuntime, type StartedService } from '@threadwork/platform';
import type { ThreadsConfig } from './config.js';
import { createDomainHandler, THREADS_DOMAIN_SUBJECTS } from './handlers/events.js';
import { createPeers } from './handlers/peers.js';
import { threadsRoutes } from './handlers/routes.js';
import { createThreadsStore } from './store/store.js';

export { ThreadsConfig } from './config.js';

/** Durable name of threads' DOMAIN consumer; replicas share it, so each event is handled by one of them. */
export const THREADS_CONSUMER = 'threads';

export async function startThreads(config: ThreadsConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'threads', config, mongo: true });
  return bootService(runtime, async ({ db, nc, logger }) => {
    const store = createThreadsStore(db);
    await store.ensureIndexes();
    const deps = { store, peers: createPeers(nc), logger };

    // Only the subjects threads reacts to; each event acked once handled (handling is idempotent).
    const handle = createDomainHandler(deps);
    await consumeDomain(runtime, {
      durable: THREADS_CONSUMER,
      subjects: Object.values(THREADS_DOMAIN_SUBJECTS),
      handle,
      drainMs: config.SHUTDOWN_TIMEOUT_MS,
    });

    await serveRoutes(runtime, SERVICES.threads, threadsRoutes(deps), config.SHUTDOWN_TIMEOUT_MS);
  });
}
