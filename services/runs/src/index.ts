import { allStreams, SERVICES } from '@threadwork/contracts';
import { bootService, ensureStream, serveRoutes, startRuntime, type StartedService } from '@threadwork/platform';
import type { RunsConfig } from './config.js';

export { RunsConfig } from './config.js';

export async function startRuns(config: RunsConfig): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'runs', config, mongo: true });
  return bootService(runtime, async () => {
    // The runs service owns the event log and the job queue; creating the streams here (idempotently,
    // from every replica) means no separate set-up step is needed for a local stack.
    for (const stream of allStreams({ runEventsMaxAgeMs: config.RUN_EVENTS_MAX_AGE_MS })) {
      await ensureStream(runtime.jsm, stream);
    }
    await serveRoutes(runtime, SERVICES.runs, [], config.SHUTDOWN_TIMEOUT_MS);
  });
}
