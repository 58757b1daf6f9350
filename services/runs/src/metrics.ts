import { STREAM_NAMES, type RunStatus } from '@threadwork/contracts';
import { meter, type JetStreamManager } from '@threadwork/platform';

/**
 * The runs service's instruments. Created on first use from the global meter: no-op until a
 * telemetry SDK is started, so tests and the local stack pay nothing for them.
 */
function createRunMetrics() {
  const m = meter();
  return {
    /** Every transition, by the status entered: the rate of runs by status. */
    transitions: m.createCounter('threadwork.runs.transitions', {
      description: 'Run transitions, by the status entered',
    }),
    /** Admission to terminal state, by outcome. */
    duration: m.createHistogram('threadwork.run.duration', {
      description: 'Time from admission to the terminal state of a run',
      unit: 's',
    }),
    eventsAppended: m.createCounter('threadwork.run.events.appended', {
      description: 'Events stored in run logs (duplicates of a retried append not counted)',
    }),
  };
}

let instruments: ReturnType<typeof createRunMetrics> | undefined;
export const runMetrics = () => (instruments ??= createRunMetrics());

export function recordTransition(status: RunStatus, terminal: boolean, createdAt: Date, at: Date): void {
  const metrics = runMetrics();
  metrics.transitions.add(1, { 'threadwork.run.status': status });
  if (terminal)
    metrics.duration.record((at.getTime() - createdAt.getTime()) / 1000, { 'threadwork.run.status': status });
}

/** Jobs waiting for a runner: RUN_JOBS is a work queue, so its message count is the queue depth. */
export function observeQueueDepth(jsm: JetStreamManager): void {
  meter()
    .createObservableGauge('threadwork.run_jobs.depth', {
      description: 'Admitted runs waiting in RUN_JOBS for a runner',
    })
    .addCallback(async (result) => {
      try {
        const info = await jsm.streams.info(STREAM_NAMES.runJobs);
        result.observe(info.state.messages);
      } catch {
        // NATS unreachable right now: no observation is better than a wrong one.
      }
    });
}
