import { describe, expect, it } from 'vitest';
import { applyEvents, emptyLog, type RunEvent } from '../../console/src/pages/thread/log.js';

// The Thread page's reading of a run log, on its own: what a person sees of each chunk type, and
// that a stream resumed from an earlier sequence (or repeating one) shows nothing twice.

let at = 0;
const event = (sequence: number, chunk: Record<string, unknown>): RunEvent => ({
  sequence,
  chunk,
  created_at: new Date(Date.UTC(2026, 0, 1, 0, 0, at++)).toISOString(),
});

const events = [
  event(1, { type: 'run.status', status: 'starting', previous: 'queued' }),
  event(2, { type: 'message.delta', item_id: 'm1', delta: 'Hel' }),
  event(3, { type: 'message.delta', item_id: 'm1', delta: 'lo' }),
  event(4, { type: 'command.started', item_id: 'c1', command: 'ls' }),
  event(5, { type: 'command.output', item_id: 'c1', delta: 'a.txt\n' }),
  event(6, { type: 'command.output', item_id: 'c1', delta: 'b.txt\n' }),
  event(7, { type: 'command.completed', item_id: 'c1', exit_code: 2, duration_ms: 40 }),
  event(8, { type: 'message.completed', item_id: 'm1', text: 'Hello, **world**' }),
  event(9, { type: 'file.changed', path: 'a.txt', kind: 'modified' }),
  event(10, { type: 'plan.updated', plan: [{ step: 'Read', status: 'completed' }], explanation: null }),
  event(11, {
    type: 'plan.updated',
    plan: [
      { step: 'Read', status: 'completed' },
      { step: 'Write', status: 'in_progress' },
    ],
  }),
  event(12, { type: 'usage', inputTokens: 10, outputTokens: 5, totalTokens: 15 }),
  event(13, { type: 'interaction.requested', interaction_id: 'int_1', kind: 'question' }),
  event(14, { type: 'interaction.settled', interaction_id: 'int_1', status: 'answered' }),
  event(15, { type: 'usage', inputTokens: 20, outputTokens: 7, totalTokens: 27 }),
  event(16, { type: 'error', code: 'tool_failed', message: 'a tool broke' }),
  event(17, { type: 'something.new', anything: true }),
  event(18, {
    type: 'run.status',
    status: 'failed',
    previous: 'running',
    error: { code: 'model_error', message: 'the model went away' },
  }),
];

describe('a run log as the Thread page shows it', () => {
  it('assembles messages and commands, keeps the latest plan and usage, and the failure', () => {
    const log = applyEvents(emptyLog(), events);
    expect(log.lastSequence).toBe(18);
    expect(log.items.map((i) => i.kind)).toEqual([
      'status',
      'message',
      'command',
      'file',
      'plan',
      'interaction',
      'error',
      'other',
      'status',
    ]);
    expect(log.items[1]).toMatchObject({ kind: 'message', text: 'Hello, **world**', complete: true });
    expect(log.items[2]).toMatchObject({
      kind: 'command',
      command: 'ls',
      output: 'a.txt\nb.txt\n',
      exitCode: 2,
      durationMs: 40,
    });
    expect(log.items[4]).toMatchObject({ kind: 'plan', sequence: 10, steps: [{}, { step: 'Write' }] });
    expect(log.items[5]).toMatchObject({ kind: 'interaction', interactionId: 'int_1', settled: 'answered' });
    expect(log.items[7]).toMatchObject({ kind: 'other', type: 'something.new' });
    expect(log.plan?.steps).toHaveLength(2);
    expect(log.usage).toEqual({ inputTokens: 20, outputTokens: 7, totalTokens: 27, costUsd: undefined });
    expect(log.status).toBe('failed');
    expect(log.error).toEqual({ code: 'model_error', message: 'the model went away', detail: undefined });
  });

  it('shows nothing twice when a resumed stream repeats what was already read', () => {
    const whole = applyEvents(emptyLog(), events);
    // Dropped after event 6, resumed from an earlier point: 4..18 arrive again, some of them twice.
    const first = applyEvents(emptyLog(), events.slice(0, 6));
    const resumed = applyEvents(first, [...events.slice(3, 10), ...events.slice(8)]);
    expect(resumed.items).toEqual(whole.items);
    expect(resumed.lastSequence).toBe(18);
    // A batch entirely of repeats changes nothing, not even the object.
    expect(applyEvents(resumed, events.slice(2, 5))).toBe(resumed);
  });

  it('starts a command’s output over when the harness resends it whole', () => {
    const log = applyEvents(emptyLog(), [
      event(1, { type: 'command.started', item_id: 'c', command: 'make' }),
      event(2, { type: 'command.output', item_id: 'c', delta: 'par' }),
      event(3, { type: 'command.output', item_id: 'c', delta: 'whole output', replace: true }),
      event(4, { type: 'command.output', item_id: 'c', delta: '[cut]', truncated: true }),
      event(5, { type: 'command.completed', item_id: 'c', exit_code: null }),
    ]);
    expect(log.items).toEqual([
      expect.objectContaining({ output: 'whole output[cut]', truncated: true, exitCode: null, durationMs: null }),
    ]);
  });

  it('ignores chunks it cannot read instead of failing on them', () => {
    const log = applyEvents(emptyLog(), [
      event(1, { type: 'message.delta' }),
      event(2, { type: 'file.changed', path: 7 }),
      { sequence: 3, chunk: null, created_at: '' },
      { sequence: 4, chunk: 'text', created_at: '' },
    ]);
    expect(log.items.map((i) => i.kind)).toEqual(['other', 'other']);
    expect(log.lastSequence).toBe(4);
  });
});
