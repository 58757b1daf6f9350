import { isTerminalRunStatus, runMayMove, type RunStatus, type TerminalRunStatus } from '@threadwork/contracts';

// The run lifecycle of DESIGN.md section 5 as pure decisions: which moves are allowed (the table
// of RUN_TRANSITIONS in contracts, which runners walk too), and what a runner's claim on a run
// means. Storage and publishing live elsewhere; nothing here does I/O.

export type TransitionResult =
  | { ok: true; from: RunStatus; to: RunStatus; terminal: boolean }
  | { ok: false; reason: 'terminal' | 'unchanged' | 'not_allowed'; message: string };

/** Decides whether a run in `current` may move to `to`. */
export function transition(current: RunStatus, to: RunStatus): TransitionResult {
  if (isTerminal(current)) {
    return { ok: false, reason: 'terminal', message: `run is ${current} and never moves again` };
  }
  if (current === to) return { ok: false, reason: 'unchanged', message: `run is already ${current}` };
  if (!runMayMove(current, to)) {
    return { ok: false, reason: 'not_allowed', message: `a run cannot move from ${current} to ${to}` };
  }
  return { ok: true, from: current, to, terminal: isTerminal(to) };
}

/** Terminal runs never change again. */
export function isTerminal(status: RunStatus): status is TerminalRunStatus {
  return isTerminalRunStatus(status);
}

/** A live run holds its thread's one live-run slot (queued … cancelling). */
export function isLive(status: RunStatus): boolean {
  return !isTerminal(status);
}

/** States in which a runner holds the run and may report on it (append events, move it). */
export function isHeldByRunner(status: RunStatus): boolean {
  return status === 'starting' || status === 'running' || status === 'waiting_for_input' || status === 'cancelling';
}

export type ClaimDecision =
  /** Take `attempt`; `first` when the run is still queued (it then moves to `starting`). */
  | { kind: 'claim'; attempt: number; first: boolean }
  /** Every attempt is spent: fail the run with `runner_lost` instead of running it again. */
  | { kind: 'exhausted'; attempts: number }
  /**
   * The run was being cancelled when its runner went away (its job came back): nobody is left to
   * stop the harness, so the cancellation is finished here.
   */
  | { kind: 'finish_cancel' }
  /** Terminal: the job is stale, the runner drops it. */
  | { kind: 'refuse'; message: string }
  /**
   * Another runner holds the run and was heard from within its lease: it is alive, and the claim is
   * refused (retryable) until `retryAfterMs` has passed without word from it.
   */
  | { kind: 'held'; retryAfterMs: number };

/**
 * The last claimed attempt of a run: its number and when its holder was last heard from (null: the
 * holder handed the run back, and holds it no longer).
 */
export interface LastClaim {
  attempt: number;
  heardAt: Date | null;
}

/**
 * What a runner's claim on a run means. Attempts count from 0. `last` is the highest attempt ever
 * claimed (null when none): the next claim takes the one after it, so a job redelivered after a
 * runner died fences that runner out by moving to a new attempt, and two runners racing for the
 * same job race for the same attempt number (decided by a unique insert). A run held by a runner
 * heard from less than `leaseMs` before `now` is not taken from it — neither taken over, nor
 * cancelled or failed in its stead — so a claim can only take a run whose holder went silent.
 */
export function decideClaim(
  status: RunStatus,
  last: LastClaim | null,
  maxAttempts: number,
  lease: { leaseMs: number; now: Date },
): ClaimDecision {
  if (isTerminal(status)) return { kind: 'refuse', message: `run is ${status}` };
  if (last !== null && last.heardAt !== null && isHeldByRunner(status)) {
    const left = last.heardAt.getTime() + lease.leaseMs - lease.now.getTime();
    if (left > 0) return { kind: 'held', retryAfterMs: left };
  }
  if (status === 'cancelling') return { kind: 'finish_cancel' };
  const attempt = last === null ? 0 : last.attempt + 1;
  if (attempt >= maxAttempts) return { kind: 'exhausted', attempts: attempt };
  return { kind: 'claim', attempt, first: status === 'queued' };
}
