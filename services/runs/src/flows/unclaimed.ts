import type { RunError } from '@threadwork/contracts';
import { isDuplicateKeyError } from '@threadwork/platform';
import type { RunsContext } from './context.js';
import { finishRun } from './finish.js';

// A run no runner claims — none serves its harness, or all were busy for that long — would keep its
// thread busy for good, its job waiting in RUN_JOBS. Past RUN_QUEUE_MAX_AGE_MS it fails `no_runner`.

const BATCH = 100;
/** Who takes attempt 0 of a run given up on, in the runners' stead. */
const SWEEPER = 'runs-unclaimed-sweep';

export const noRunnerError = (run: { harness: string }, maxAgeMs: number): RunError => ({
  code: 'no_runner',
  message: `no runner took the run within ${maxAgeMs} ms: none serves harness "${run.harness}", or every one was busy`,
});

/** Fails the runs still queued RUN_QUEUE_MAX_AGE_MS after their admission; answers how many. */
export async function failUnclaimedRuns(ctx: RunsContext, now: Date): Promise<number> {
  const maxAgeMs = ctx.config.RUN_QUEUE_MAX_AGE_MS;
  const cutoff = new Date(now.getTime() - maxAgeMs);
  const stale = await ctx.store.queuedBefore(cutoff, BATCH);
  let failed = 0;
  for (const run of stale) {
    // Attempt 0 is taken the way a runner's claim takes it (one insert wins): a runner that claimed
    // the run first keeps it, and one that comes after finds the run over.
    try {
      await ctx.store.insertAttempt({
        _id: `${run._id}:0`,
        run_id: run._id,
        attempt: 0,
        runner_id: SWEEPER,
        at: now,
      });
    } catch (err) {
      if (isDuplicateKeyError(err)) continue;
      throw err;
    }
    await finishRun(ctx, run, 'failed', { error: noRunnerError(run, maxAgeMs) });
    ctx.logger.warn(
      { run_id: run._id, thread_id: run.thread_id, harness: run.harness },
      'no runner took the run; failed it',
    );
    failed++;
  }
  return failed;
}
