import { describe, expect, it } from 'vitest';
import { RUN_TRANSITIONS, runMayMove, runMovesTo } from './run-transitions.js';
import { isTerminalRunStatus, RUN_STATUSES, TERMINAL_RUN_STATUSES, type RunStatus } from './values.js';

type Table = { readonly [S in RunStatus]: readonly RunStatus[] };

const LIVE = RUN_STATUSES.filter((s) => !isTerminalRunStatus(s));
/** The states a runner works a run in, before it is cancelled. */
const WORKED: RunStatus[] = ['starting', 'running', 'waiting_for_input'];

/** The states reachable from `from` in `table`, never passing through `avoid`. */
function reachable(table: Table, from: RunStatus, avoid?: RunStatus): Set<RunStatus> {
  const seen = new Set<RunStatus>([from]);
  const todo = [from];
  while (todo.length > 0) {
    for (const to of table[todo.pop() as RunStatus]) {
      if (seen.has(to) || to === avoid) continue;
      seen.add(to);
      todo.push(to);
    }
  }
  return seen;
}

/** What the lifecycle needs of its table, each broken promise said in a line. */
function violations(table: Table): string[] {
  const out: string[] = [];
  for (const from of RUN_STATUSES) {
    if (isTerminalRunStatus(from) && table[from].length > 0) out.push(`terminal ${from} moves on`);
    if (table[from].includes(from)) out.push(`${from} moves to itself`);
  }
  // Every state is one a run can come to, and a live run can still end every way.
  const fromQueued = reachable(table, 'queued');
  for (const s of RUN_STATUSES) if (!fromQueued.has(s)) out.push(`${s} unreachable from queued`);
  for (const from of LIVE) {
    const ends = reachable(table, from);
    for (const end of TERMINAL_RUN_STATUSES) if (!ends.has(end)) out.push(`${from} cannot end ${end}`);
    // The last resort of a runner (and of the runs service failing a lost run) is one move from anywhere.
    if (!table[from].includes('failed')) out.push(`${from} cannot fail at once`);
  }
  // A queued run has no runner to confirm a cancel: it is cancelled outright.
  if (!table.queued.includes('cancelled')) out.push('queued cannot be cancelled outright');
  for (const from of WORKED) {
    // A worked run is cancelled through `cancelling`, which its runner confirms.
    if (!table[from].includes('cancelling')) out.push(`${from} cannot start cancelling`);
    // A turn that completes is reported completed, never by way of a cancel.
    if (!reachable(table, from, 'cancelling').has('completed')) out.push(`${from} completes only through cancelling`);
  }
  return out;
}

function without(table: Table, from: RunStatus, to: RunStatus): Table {
  return { ...table, [from]: table[from].filter((s) => s !== to) };
}

describe('the run transition table', () => {
  it('keeps every promise of the lifecycle', () => {
    expect(violations(RUN_TRANSITIONS)).toEqual([]);
  });

  it('has no move the lifecycle could do without', () => {
    // Each edge is there for a reason the invariants state: without it, one of them breaks.
    for (const from of RUN_STATUSES) {
      for (const to of RUN_TRANSITIONS[from]) {
        expect(violations(without(RUN_TRANSITIONS, from, to)), `${from} → ${to}`).not.toEqual([]);
      }
    }
  });

  it('walks only allowed moves to each terminal state', () => {
    for (const from of RUN_STATUSES) {
      for (const target of TERMINAL_RUN_STATUSES) {
        const path = runMovesTo(from, target);
        if (isTerminalRunStatus(from)) {
          expect(path, `${from} → ${target}`).toBeNull();
          continue;
        }
        expect(path, `${from} → ${target}`).not.toBeNull();
        const moves = path as RunStatus[];
        expect(moves.at(-1)).toBe(target);
        let at: RunStatus = from;
        for (const to of moves) {
          expect(runMayMove(at, to), `${from} → ${target} via ${at} → ${to}`).toBe(true);
          at = to;
        }
      }
    }
  });

  it('prefers the way back through running to completing through a cancel', () => {
    expect(runMovesTo('waiting_for_input', 'completed')).toEqual(['running', 'completed']);
    expect(runMovesTo('starting', 'completed')).toEqual(['running', 'completed']);
    expect(runMovesTo('running', 'cancelled')).toEqual(['cancelling', 'cancelled']);
    expect(runMovesTo('cancelling', 'completed')).toEqual(['completed']);
  });
});
