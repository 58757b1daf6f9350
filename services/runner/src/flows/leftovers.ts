import type { HarnessSession } from '../harness/harness.js';
import type { RunState } from './run-state.js';

// The harness once the job is done with it: kept warm for the thread's next run when nothing of
// the agent's goes on in it, else stopped with its jail.

/**
 * Puts the run's harness away as the job ends. A fenced attempt's harness is stopped, not kept for
 * the thread's next run: the thread was taken over, so its process holds a conversation that misses
 * the new attempt's turn, and left running it would go on acting in a workspace that is no longer
 * this attempt's. A cancelled or timed-out run takes its harness with it too, also when the stop
 * came while the harness was still starting and no turn had begun.
 */
export async function putSessionAway(run: RunState): Promise<void> {
  const { session } = run;
  if (!session) return;
  const stopped = run.stopReason === 'cancel' || run.stopReason === 'timeout' || run.stopReason === 'disk_full';
  if (run.isFenced || stopped) await run.deps.sessions.discard(run.job.thread_id, session);
  // Kept warm for the thread's next run, and nothing else: what the agent left running goes
  // (or, when that could not be made sure of, the jail and the harness with it).
  else if (await stopLeftovers(run, session)) run.deps.sessions.release(run.job.thread_id, session);
}

/**
 * Kills what the agent left running in its jail, keeping the harness; logs what it killed. A sweep
 * that did not settle (or failed) may have missed a process, which would go on beside the runner's
 * own git over the workspace and into the thread's next run: then the session is discarded, which
 * kills the jail whole (its pid namespace, every process in it). True when the harness was kept.
 */
export async function stopLeftovers(run: RunState, session: HarnessSession): Promise<boolean> {
  const sweep = await session.stopLeftovers().catch((err: unknown) => {
    run.log.warn({ err }, 'the processes the agent left running could not be listed');
    return { processes: [], settled: false };
  });
  const processes = sweep.processes.map((p) => p.slice(0, 200));
  if (processes.length > 0) run.log.warn({ processes }, 'stopped processes the agent left running');
  if (sweep.settled && session.alive) return true;
  if (!session.alive) {
    await run.deps.sessions.discard(run.job.thread_id, session);
    return false;
  }
  run.log.error(
    { processes },
    'the processes the agent left running could not all be stopped one by one; killing its jail and the harness',
  );
  await run.deps.sessions.discard(run.job.thread_id, session);
  return false;
}
