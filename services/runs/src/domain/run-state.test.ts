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
  it('takes attempt 0 of a queued run that was never claimed', () => {
    expect(decideClaim('queued', null, 3)).toEqual({ kind: 'claim', attempt: 0, first: true });
  });

  it('takes the next attempt of a run a runner already holds (a redelivered job)', () => {
    for (const status of ['starting', 'running', 'waiting_for_input'] as const) {
      expect(decideClaim(status, 0, 3)).toEqual({ kind: 'claim', attempt: 1, first: false });
      expect(decideClaim(status, 1, 3)).toEqual({ kind: 'claim', attempt: 2, first: false });
    }
  });

  it('continues after an attempt that was recorded while the run still reads queued', () => {
    expect(decideClaim('queued', 0, 3)).toEqual({ kind: 'claim', attempt: 1, first: true });
  });

  it('gives up once every attempt is spent', () => {
    expect(decideClaim('running', 2, 3)).toEqual({ kind: 'exhausted', attempts: 3 });
    expect(decideClaim('starting', 0, 1)).toEqual({ kind: 'exhausted', attempts: 1 });
  });

  it('finishes a cancellation whose runner went away, and refuses terminal runs', () => {
    expect(decideClaim('cancelling', 0, 3)).toEqual({ kind: 'finish_cancel' });
    for (const status of TERMINAL_RUN_STATUSES) expect(decideClaim(status, 0, 3).kind).toBe('refuse');
  });
});
