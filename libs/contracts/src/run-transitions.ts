import { isTerminalRunStatus, type RunStatus } from './values.js';

// The run lifecycle's moves, in one place: the runs service allows exactly these, and a runner
// walks them to end a run. Both read this table, so they cannot disagree about a move.

/**
 * Every allowed move, the preferred first where a run has more than one way on (a runner ending a
 * run takes the first shortest way: `waiting_for_input` reaches `completed` back through
 * `running`, never through `cancelling`). `cancelling → completed` is allowed on purpose: the
 * harness can finish its turn before it sees the cancel, and then the work is done and pushed —
 * reporting it as cancelled would hide a result the user has. `starting → queued` is deliberately
 * absent: a run never goes back to the queue; a redelivered job claims it again where it stands.
 */
export const RUN_TRANSITIONS: { readonly [S in RunStatus]: readonly RunStatus[] } = {
  queued: ['starting', 'cancelled', 'failed'],
  starting: ['running', 'failed', 'cancelling'],
  running: ['waiting_for_input', 'completed', 'failed', 'cancelling'],
  waiting_for_input: ['running', 'cancelling', 'failed'],
  cancelling: ['cancelled', 'failed', 'completed'],
  completed: [],
  failed: [],
  cancelled: [],
};

/** Whether the table allows a run in `from` to move to `to` in one move. */
export function runMayMove(from: RunStatus, to: RunStatus): boolean {
  return RUN_TRANSITIONS[from].includes(to);
}

/**
 * The fewest moves the table allows from `from` to `target` (the preferred one where several are
 * as short), `target` last; null when `target` cannot be reached (a terminal run never moves).
 */
export function runMovesTo(from: RunStatus, target: RunStatus): RunStatus[] | null {
  if (isTerminalRunStatus(from)) return null;
  const cameFrom = new Map<RunStatus, RunStatus>();
  const seen = new Set<RunStatus>([from]);
  let frontier: RunStatus[] = [from];
  while (frontier.length > 0) {
    const next: RunStatus[] = [];
    for (const at of frontier) {
      for (const to of RUN_TRANSITIONS[at]) {
        if (seen.has(to)) continue;
        seen.add(to);
        cameFrom.set(to, at);
        if (to === target) {
          const path: RunStatus[] = [to];
          for (let step = at; step !== from; step = cameFrom.get(step) as RunStatus) path.unshift(step);
          return path;
        }
        next.push(to);
      }
    }
    frontier = next;
  }
  return null;
}
