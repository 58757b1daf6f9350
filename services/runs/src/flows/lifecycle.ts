import { subjects, type RunStatus, type RunUsage } from '@threadwork/contracts';
import { publishSignal } from '@threadwork/platform';
import { isHeldByRunner } from '../domain/run-state.js';
import type { RunDoc } from '../store/runs.js';
import { announceMove } from './announce.js';
import type { RunsContext } from './context.js';
import { settleIfTerminal } from './finish.js';

// How a run moves once a move is known to be allowed (domain/run-state.ts decides that).
//
// Non-terminal moves are conditional updates on (run, attempt, status): DESIGN.md allows those for
// decisions where a rare double success is harmless. Terminal moves are decided by inserting into
// run_terminals (first insert wins) and then finished in a fixed order. Because FerretDB writes
// whole documents, a concurrent move can overwrite the run document; every move therefore looks
// for a terminal decision and a cancel request after its write and converges on them.

export interface MoveOptions {
  sandbox_id?: string | undefined;
  usage?: RunUsage | undefined;
  /** A claim moves the run to a new attempt together with `starting`. */
  attempt?: number;
  runner_id?: string;
  /**
   * Names a move the runs service makes itself for a known reason (a claim, an interaction), so
   * that two services finishing the same work emit one status event. Runner moves are keyed by
   * the run's move count instead.
   */
  cause?: string;
}

/** The attempt that made the run's last move (its `status_key`, as moveRun and admission write it). */
export function moveAttempt(run: RunDoc): number | null {
  const attempt = /^status:(\d+):/.exec(run.status_key)?.[1];
  return attempt === undefined ? null : Number(attempt);
}

/**
 * Moves a live run to a non-terminal `to` if it is still in `run.status` at `run.attempt`. Returns
 * the run after the move (which may be terminal or `cancelling` if those were decided meanwhile),
 * or null when the run had moved on, so the caller decides again on a fresh read.
 */
export async function moveRun(
  ctx: RunsContext,
  run: RunDoc,
  to: RunStatus,
  opts: MoveOptions = {},
): Promise<RunDoc | null> {
  const now = new Date();
  const attempt = opts.attempt ?? run.attempt;
  const transitions = run.transitions + 1;
  const statusKey = `status:${attempt}:${opts.cause ?? transitions}:${to}`;
  const after = await ctx.store.updateIfUnmoved(run, {
    status: to,
    previous_status: run.status,
    status_key: statusKey,
    transitions,
    attempt,
    updated_at: now,
    ...(to === 'running' && !run.started_at ? { started_at: now } : {}),
    ...(opts.sandbox_id ? { sandbox_id: opts.sandbox_id } : {}),
    ...(opts.usage ? { usage: opts.usage } : {}),
    ...(opts.runner_id ? { runner_id: opts.runner_id } : {}),
  });
  if (!after) return null;

  // Looked for after the write (both at once): a terminal decision or a cancel request written
  // while this move raced it must not be lost to the move's write.
  const [decided, cancelRequested] = await Promise.all([
    ctx.store.terminal(run._id),
    to !== 'cancelling' && isHeldByRunner(to) ? ctx.store.cancelRequested(run._id) : false,
  ]);
  const terminal = await settleIfTerminal(ctx, after, decided);
  if (terminal) return terminal;
  await announceMove(ctx, after);
  if (cancelRequested) return (await enterCancelling(ctx, after)) ?? after;
  return after;
}

/** Moves a runner-held run to `cancelling`, then tells its runner (after the write, as DESIGN.md asks). */
export async function enterCancelling(ctx: RunsContext, run: RunDoc): Promise<RunDoc | null> {
  const after = await moveRun(ctx, run, 'cancelling', { cause: 'cancel' });
  if (after && !after.terminal) signalCancel(ctx, run._id);
  return after;
}

export function signalCancel(ctx: RunsContext, runId: string): void {
  publishSignal(ctx.nc, subjects.runSignal(runId), { type: 'cancel' });
}
