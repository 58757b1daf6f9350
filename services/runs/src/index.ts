import { allStreams, consumerDefinitions, SERVICES, STREAM_NAMES } from '@threadwork/contracts';
import {
  bootService,
  ensureDefinedConsumer,
  ensureStream,
  serveRoutes,
  startRuntime,
  type StartedService,
} from '@threadwork/platform';
import type { RunsConfig } from './config.js';
import type { RunsContext } from './flows/context.js';
import { failUnclaimedRuns } from './flows/unclaimed.js';
import { runsRoutes } from './handlers/routes.js';
import { observeQueueDepth } from './metrics.js';
import { createEventLog } from './store/event-log.js';
import { createInteractionStore } from './store/interactions.js';
import { createRunStore } from './store/runs.js';

export { RunsConfig } from './config.js';

export async function startRuns(config: RunsConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'runs', config, mongo: true });
  return bootService(runtime, async () => {
    // The runs service owns the streams and every consumer on them (consumers.ts): creating them
    // here (idempotently, from every replica) means no separate set-up step is needed, and no
    // other service may create one: the others wait for theirs, then only pull and ack.
    for (const stream of allStreams({ runEventsMaxAgeMs: config.RUN_EVENTS_MAX_AGE_MS })) {
      await ensureStream(runtime.jsm, stream, { replicas: config.NATS_STREAM_REPLICAS, logger: runtime.logger });
    }
    const consumers = consumerDefinitions({
      harnesses: config.HARNESSES,
      jobAckWaitMs: config.JOB_ACK_WAIT_MS,
      jobMaxDeliver: config.JOB_MAX_DELIVER,
    });
    for (const consumer of consumers) await ensureDefinedConsumer(runtime.jsm, consumer);
    const store = createRunStore(runtime.db);
    const interactions = createInteractionStore(runtime.db);
    await store.ensureIndexes();
    await interactions.ensureIndexes();
    // RUN_EVENTS kept by more than one server: reads of the log's end are checked with its leader.
    const replicated = (await runtime.jsm.streams.info(STREAM_NAMES.runEvents)).config.num_replicas > 1;
    const log = createEventLog({ ...runtime, replicated });
    const ctx: RunsContext = {
      store,
      interactions,
      log,
      nc: runtime.nc,
      js: runtime.js,
      config,
      logger: runtime.logger,
    };
    observeQueueDepth(runtime.jsm);

    if (config.RUN_QUEUE_MAX_AGE_MS > 0) {
      let sweeping = false;
      const timer = setInterval(
        () => {
          if (sweeping) return;
          sweeping = true;
          failUnclaimedRuns(ctx, new Date())
            .catch((err: unknown) => runtime.logger.warn({ err }, 'unclaimed-run sweep failed; trying again'))
            .finally(() => (sweeping = false));
        },
        Math.max(100, Math.min(60_000, Math.floor(config.RUN_QUEUE_MAX_AGE_MS / 2))),
      );
      timer.unref();
      runtime.lifecycle.add('unclaimed-run sweep', () => clearInterval(timer));
    }
    await serveRoutes(runtime, SERVICES.runs, runsRoutes(ctx), config.SHUTDOWN_TIMEOUT_MS);
  });
}
