import { meter } from '@threadwork/platform';

/**
 * The runner's instruments. Created on first use from the global meter: no-op until a telemetry
 * SDK is started, so tests and the local stack pay nothing for them.
 */
function createRunnerMetrics() {
  const m = meter();
  return {
    /** Time to make a thread's workspace ready: a first clone, or a fetch into the one kept. */
    sandboxStart: m.createHistogram('threadwork.sandbox.start.duration', {
      description: 'Time to prepare a sandbox for a run (clone or fetch, thread branch, harness home)',
      unit: 's',
    }),
  };
}

let instruments: ReturnType<typeof createRunnerMetrics> | undefined;
export const runnerMetrics = () => (instruments ??= createRunnerMetrics());
