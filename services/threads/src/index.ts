import { CONSUMERS, harnessCatalog, SERVICES } from '@threadwork/contracts';
import { bootService, consumeDomain, serveRoutes, startRuntime, type StartedService } from '@threadwork/platform';
import type { ThreadsConfig } from './config.js';
import { SerialByKey } from './domain/limits.js';
import { createPeers } from './clients/peers.js';
import { sweep } from './flows/sweep.js';
import { domainRoutes } from './handlers/events.js';
import { threadsRoutes } from './handlers/routes.js';
import { createThreadsStore } from './store/store.js';

export { ThreadsConfig } from './config.js';

/**
 * How long one of a user's admissions waits for the one before it (SerialByKey): about what the
 * gateway waits for an answer (REQUEST_TIMEOUT_MS, 5 s by default), after which nobody is waiting.
 */
const SERIAL_WAIT_MS = 4_000;

/** Durable name of threads' DOMAIN consumer; replicas share it, so each event is handled by one of them. */
export const THREADS_CONSUMER = CONSUMERS.threads;

export async function startThreads(config: ThreadsConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'threads', config, mongo: true });
  return bootService(runtime, async ({ db, nc, logger }) => {
    const store = createThreadsStore(db, { idempotencyTtlMs: config.IDEMPOTENCY_TTL_MS });
    await store.ensureIndexes();
    const deps = {
      store,
      peers: createPeers(nc),
      logger,
      harnesses: harnessCatalog(config),
      limits: {
        liveRunsPerUser: config.MAX_LIVE_RUNS_PER_USER,
        threadsPerMinute: config.THREADS_PER_MINUTE_PER_USER,
      },
      serial: new SerialByKey(SERIAL_WAIT_MS),
    };

    if (config.SWEEP_INTERVAL_MS > 0) {
      let sweeping = false;
      const timer = setInterval(() => {
        if (sweeping) return;
        sweeping = true;
        sweep(deps, new Date(), config.IDEMPOTENCY_TTL_MS)
          .catch((err: unknown) => logger.warn({ err }, 'sweep failed; trying again at the next interval'))
          .finally(() => (sweeping = false));
      }, config.SWEEP_INTERVAL_MS);
      timer.unref();
      runtime.lifecycle.add('sweep', () => clearInterval(timer));
    }

    // Only the subjects threads reacts to; each event acked once handled (handling is idempotent).
    await consumeDomain(runtime, {
      durable: THREADS_CONSUMER,
      events: domainRoutes(deps),
      drainMs: config.SHUTDOWN_TIMEOUT_MS,
    });

    await serveRoutes(runtime, SERVICES.threads, threadsRoutes(deps), config.SHUTDOWN_TIMEOUT_MS);
  });
}
