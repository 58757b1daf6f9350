import { RUN_STATUSES, TERMINAL_RUN_STATUSES, type RunStatus } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import { decideClaim, isHeldByRunner, isLive, isTerminal, transition } from './run-state.js';

const allowed: ReadonlyArray<[RunStatus, RunStatus]> = [
  ['queued', 'starting'],
  ['queued', 'cancelled'],
  ['queued', 'failed'],
  ['starting', 'running'],
  ['starting', 'failed'],
  ['starting', 'cancelling'],
  ['running', 'waiting_for_input'],
  ['running', 'completed'],
  ['running', 'failed'],
  ['running', 'cancelling'],
  ['waiting_for_input', 'running'],
  ['waiting_for_input', 'cancelling'],
  ['waiting_for_input', 'failed'],
  ['cancelling', 'cancelled'],
  ['cancelling', 'failed'],
  ['cancelling', 'completed'],
];
const isAllowed = (from: RunStatus, to: RunStatus) => allowed.some(([f, t]) => f === from && t === to);
const pairs = RUN_STATUSES.flatMap((from) => RUN_STATUSES.map((to) => [from, to] as const));

describe('run state machine', () => {
  it.each(pairs)('%s → %s', (from, to) => {
    const result = transition(from, to);
    if (isAllowed(from, to)) {
      expect(result).toEqual({ ok: true, from, to, terminal: TERMINAL_RUN_STATUSES.some((s) => s === to) });
      return;
    }
    expect(result.ok).toBe(false);
    if (result.ok) return;
    if (isTerminal(from)) expect(result.reason).toBe('terminal');
    else if (from === to) expect(result.reason).toBe('unchanged');
    else expect(result.reason).toBe('not_allowed');
    expect(result.message).toContain(from);
  });

  it('never moves a terminal run and never sends a run back to the queue', () => {
    for (const from of TERMINAL_RUN_STATUSES) {
      for (const to of RUN_STATUSES) expect(transition(from, to).ok).toBe(false);
    }
    for (const from of RUN_STATUSES) expect(transition(from, 'queued').ok).toBe(false);
  });

  it('tells live from terminal states', () => {
    expect(RUN_STATUSES.filter(isTerminal)).toEqual(['completed', 'failed', 'cancelled']);
    expect(RUN_STATUSES.filter(isLive)).toEqual(['queued', 'starting', 'running', 'waiting_for_input', 'cancelling']);
    expect(RUN_STATUSES.filter(isHeldByRunner)).toEqual(['starting', 'running', 'waiting_for_input', 'cancelling']);
  });
});

describe('claims', () => {
  const now = new Date('2026-01-01T00:01:00Z');
  const lease = { leaseMs: 30_000, now };
  /** Attempt `attempt`, its holder last heard from `agoMs` before now. */
  const last = (attempt: number, agoMs = 60_000) => ({ attempt, heardAt: new Date(now.getTime() - agoMs) });

  it('takes attempt 0 of a queued run that was never claimed', () => {
    expect(decideClaim('queued', null, 3, lease)).toEqual({ kind: 'claim', attempt: 0, first: true });
  });

  it('takes the next attempt of a run whose holder went silent for a lease (a redelivered job)', () => {
    for (const status of ['starting', 'running', 'waiting_for_input'] as const) {
      expect(decideClaim(status, last(0), 3, lease)).toEqual({ kind: 'claim', attempt: 1, first: false });
      expect(decideClaim(status, last(1, 30_000), 3, lease)).toEqual({ kind: 'claim', attempt: 2, first: false });
    }
  });

  it('refuses to take a run from a holder heard from within its lease, saying when to try again', () => {
    for (const status of ['starting', 'running', 'waiting_for_input', 'cancelling'] as const) {
      expect(decideClaim(status, last(0, 0), 3, lease)).toEqual({ kind: 'held', retryAfterMs: 30_000 });
      expect(decideClaim(status, last(1, 29_000), 3, lease)).toEqual({ kind: 'held', retryAfterMs: 1_000 });
    }
    // Not even to fail it: a live holder's run never runs out of attempts to a claim.
    expect(decideClaim('running', last(2, 1_000), 3, lease).kind).toBe('held');
  });

  it('takes a run its holder handed back at once', () => {
    expect(decideClaim('running', { attempt: 0, heardAt: null }, 3, lease)).toEqual({
      kind: 'claim',
      attempt: 1,
      first: false,
    });
  });

  it('continues after an attempt that was recorded while the run still reads queued', () => {
    expect(decideClaim('queued', last(0, 0), 3, lease)).toEqual({ kind: 'claim', attempt: 1, first: true });
  });

  it('gives up once every attempt is spent', () => {
    expect(decideClaim('running', last(2), 3, lease)).toEqual({ kind: 'exhausted', attempts: 3 });
    expect(decideClaim('starting', last(0), 1, lease)).toEqual({ kind: 'exhausted', attempts: 1 });
  });

  it('finishes a cancellation whose runner went away, and refuses terminal runs', () => {
    expect(decideClaim('cancelling', last(0), 3, lease)).toEqual({ kind: 'finish_cancel' });
    for (const status of TERMINAL_RUN_STATUSES) expect(decideClaim(status, last(0, 0), 3, lease).kind).toBe('refuse');
  });
});
