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
  return bootService(runtime, async ({ db, nc, js, jsm, logger, lifecycle }) => {
    const store = createThreadsStore(db);
    await store.ensureIndexes();
    const deps = { store, peers: createPeers(nc), logger };

    // DOMAIN keeps events for a week whoever has read them (limits retention); this durable
    // consumer sees only the four subjects threads reacts to, and acks each once handled.
    await ensureStream(jsm, DOMAIN_STREAM);
    await ensureConsumer(jsm, DOMAIN_STREAM.name, {
      durable_name: THREADS_CONSUMER,
      filter_subjects: Object.values(THREADS_DOMAIN_SUBJECTS),
    });
    const handle = createDomainHandler(deps);
    const consumer = await consumeJson(
      js,
      { stream: DOMAIN_STREAM.name, durable: THREADS_CONSUMER, logger },
      (payload, msg) => handle(msg.subject, payload),
    );
    lifecycle.add('domain-consumer', () => consumer.stop(config.SHUTDOWN_TIMEOUT_MS));

    await serveRoutes(runtime, SERVICES.threads, threadsRoutes(deps), config.SHUTDOWN_TIMEOUT_MS);
  });
}
