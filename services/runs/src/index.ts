import { allStreams, consumerDefinitions, runEventLayout, SERVICES } from '@threadwork/contracts';
import {
  bootService,
  checkRunEventShards,
  ensureDefinedConsumer,
  ensureStream,
  serveRoutes,
  startRuntime,
  type StartedService,
} from '@threadwork/platform';
import type { RunsConfig } from './config.js';
import { archiveDueRuns } from './flows/archive.js';
import type { RunsContext } from './flows/context.js';
import { failUnclaimedRuns } from './flows/unclaimed.js';
import { runsRoutes } from './handlers/routes.js';
import { observeQueueDepth } from './metrics.js';
import { createEventArchive } from './store/event-archive.js';
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
    // A run's stream follows from its id and the shard count: a count other than the one the
    // streams in place were made for would look for every log in the wrong place, so it stops here.
    await checkRunEventShards(runtime.jsm, config.RUN_EVENT_SHARDS);
    const streams = allStreams({
      runEventsMaxAgeMs: config.RUN_EVENTS_MAX_AGE_MS,
      runEventShards: config.RUN_EVENT_SHARDS,
    });
    for (const stream of streams) {
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
    const archive = createEventArchive(runtime.db);
    const layout = runEventLayout(config.RUN_EVENT_SHARDS);
    // The run event streams kept by more than one server (all shards alike): reads of a log's end
    // are checked with its stream's leader.
    const replicated = (await runtime.jsm.streams.info(layout.streams[0]!)).config.num_replicas > 1;
    const log = createEventLog({ ...runtime, layout, replicated });
    const ctx: RunsContext = {
      store,
      interactions,
      log,
      archive,
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
    if (config.RUN_EVENTS_ARCHIVE_AFTER_MS > 0) {
      // Every replica sweeps; archiving a run is idempotent (flows/archive.ts), so two at once
      // only repeat each other's work.
      let archiving = false;
      const timer = setInterval(
        () => {
          if (archiving) return;
          archiving = true;
          archiveDueRuns(ctx, new Date())
            .catch((err: unknown) => runtime.logger.warn({ err }, 'run event archive sweep failed; trying again'))
            .finally(() => (archiving = false));
        },
        Math.max(100, Math.min(60_000, Math.floor(config.RUN_EVENTS_ARCHIVE_AFTER_MS / 2))),
      );
      timer.unref();
      runtime.lifecycle.add('run event archive sweep', () => clearInterval(timer));
    }
    await serveRoutes(runtime, SERVICES.runs, runsRoutes(ctx), config.SHUTDOWN_TIMEOUT_MS);
  });
}
