import { RUN_STATUSES } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import { continuesLostTurn, decideOutcome, harnessAnswers, planDecision, stepsTo } from './outcome.js';

describe('the end of a run', () => {
  const error = { code: 'model_error', message: 'HTTP 500' };
  const bounds = { timeoutMs: 1000, disk: { bytes: 5_000_000 } };

  it('decides the terminal state from the turn and why it was stopped', () => {
    expect(decideOutcome({ status: 'completed', error: null }, null, bounds)).toEqual({ to: 'completed' });
    // A cancel that came while the turn was going wins even if the turn then completed (the
    // harness should have stopped); one that came after the turn ended is not passed here.
    expect(decideOutcome({ status: 'completed', error: null }, 'cancel', bounds)).toEqual({ to: 'cancelled' });
    // Work the timeout caught too late is kept.
    expect(decideOutcome({ status: 'completed', error: null }, 'timeout', bounds)).toEqual({ to: 'completed' });
    expect(decideOutcome({ status: 'interrupted', error: null }, 'cancel', bounds)).toEqual({ to: 'cancelled' });
    expect(decideOutcome({ status: 'failed', error }, 'cancel', bounds)).toEqual({ to: 'cancelled' });
    expect(decideOutcome({ status: 'interrupted', error: null }, 'timeout', bounds)).toMatchObject({
      to: 'failed',
      error: { code: 'harness_timeout' },
    });
    expect(decideOutcome({ status: 'failed', error }, null, bounds)).toEqual({ to: 'failed', error });
    expect(decideOutcome({ status: 'failed', error: null }, null, bounds)).toMatchObject({
      error: { code: 'harness_error' },
    });
    expect(decideOutcome({ status: 'interrupted', error: null }, null, bounds)).toMatchObject({
      error: { code: 'harness_interrupted' },
    });
    // A sandbox that outgrew its bound fails the run, even a turn that went on to complete.
    for (const status of ['completed', 'interrupted', 'failed'] as const) {
      expect(decideOutcome({ status, error: null }, 'disk_full', bounds)).toMatchObject({
        to: 'failed',
        error: { code: 'sandbox_disk_full', message: expect.stringContaining('5000000 bytes') },
      });
    }
  });

  it('continues a lost attempt’s turn only when the turn had begun', () => {
    // A first attempt has nothing to continue.
    expect(continuesLostTurn(0, 'starting')).toBe(false);
    // Lost once the turn was under way: the takeover needs the lost attempt's session and workspace.
    expect(continuesLostTurn(1, 'running')).toBe(true);
    expect(continuesLostTurn(2, 'waiting_for_input')).toBe(true);
    // Lost while its sandbox was prepared or its harness started: the takeover starts it afresh.
    expect(continuesLostTurn(1, 'starting')).toBe(false);
    expect(continuesLostTurn(1, 'queued')).toBe(false);
  });

  it('finds the moves the state machine allows to each terminal state', () => {
    expect(stepsTo('running', 'completed')).toEqual(['completed']);
    expect(stepsTo('waiting_for_input', 'completed')).toEqual(['running', 'completed']);
    expect(stepsTo('starting', 'completed')).toEqual(['running', 'completed']);
    expect(stepsTo('running', 'cancelled')).toEqual(['cancelling', 'cancelled']);
    expect(stepsTo('waiting_for_input', 'cancelled')).toEqual(['cancelling', 'cancelled']);
    expect(stepsTo('cancelling', 'cancelled')).toEqual(['cancelled']);
    expect(stepsTo('cancelling', 'completed')).toEqual(['completed']);
    for (const status of ['starting', 'running', 'waiting_for_input', 'cancelling'] as const) {
      expect(stepsTo(status, 'failed')).toEqual(['failed']);
    }
    for (const status of ['queued', 'completed', 'failed', 'cancelled'] as const) {
      expect(stepsTo(status, 'failed')).toBeNull();
    }
    expect(RUN_STATUSES).toHaveLength(8);
  });

  it('turns a settlement into the harness’s answers', () => {
    expect(
      harnessAnswers('answered', {
        file: { kind: 'options', optionIds: ['NOTES.md'] },
        why: { kind: 'text', text: 'because' },
        junk: { kind: 'nonsense' },
      }),
    ).toEqual({ file: ['NOTES.md'], why: ['because'] });
    expect(harnessAnswers('cancelled', {})).toEqual({});
  });

  it('turns a settled plan approval into the harness’s decision: anything but approve is a rejection', () => {
    expect(planDecision('answered', { plan: { kind: 'approve' } })).toEqual({ approved: true });
    expect(planDecision('answered', { plan: { kind: 'reject', text: 'smaller steps' } })).toEqual({
      approved: false,
      comment: 'smaller steps',
    });
    expect(planDecision('answered', { plan: { kind: 'reject' } })).toEqual({ approved: false, comment: null });
    expect(planDecision('answered', { plan: { kind: 'options', optionIds: ['yes'] } })).toEqual({
      approved: false,
      comment: null,
    });
    expect(planDecision('cancelled', {})).toEqual({ approved: false, comment: null });
  });
});
