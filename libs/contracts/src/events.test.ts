import { describe, expect, it } from 'vitest';
import { RUN_EVENT_CHUNK_TYPES, RunEventChunk } from './events.js';

const examples: Record<(typeof RUN_EVENT_CHUNK_TYPES)[number], Record<string, unknown>> = {
  'run.status': { type: 'run.status', status: 'failed', previous: 'running', error: { code: 'harness', message: 'x' } },
  'sandbox.ready': {
    type: 'sandbox.ready',
    sandbox_id: 'sbx_1',
    layers: ['bubblewrap-jail', 'codex-workspace-write'],
    egress: 'none',
  },
  'message.delta': { type: 'message.delta', item_id: 'i1', delta: 'Hel' },
  'message.completed': { type: 'message.completed', item_id: 'i1', text: 'Hello' },
  'reasoning.delta': { type: 'reasoning.delta', item_id: 'i2', delta: 'think' },
  'command.started': { type: 'command.started', item_id: 'i3', command: 'ls -la' },
  'command.output': { type: 'command.output', item_id: 'i3', delta: 'README.md\n' },
  'command.completed': { type: 'command.completed', item_id: 'i3', exit_code: 0, duration_ms: 3000 },
  'file.changed': { type: 'file.changed', item_id: 'i4', path: 'README.md', kind: 'modified' },
  'plan.updated': { type: 'plan.updated', plan: [{ step: 'Read', status: 'completed' }], explanation: null },
  'interaction.requested': { type: 'interaction.requested', interaction_id: 'int_1', kind: 'question' },
  'interaction.settled': { type: 'interaction.settled', interaction_id: 'int_1', status: 'answered' },
  'control.applied': { type: 'control.applied', control_id: 'ctl_1', kind: 'steer' },
  usage: { type: 'usage', inputTokens: 100, outputTokens: 20, totalTokens: 120 },
  'network.refused': { type: 'network.refused', host: 'example.com', port: 443, reason: 'not in SANDBOX_EGRESS_ALLOW' },
  error: { type: 'error', code: 'model_error', message: 'HTTP 500', detail: 'upstream' },
};

describe('RunEventChunk', () => {
  it.each(RUN_EVENT_CHUNK_TYPES)('parses a %s chunk', (type) => {
    expect(RunEventChunk.parse(examples[type])).toEqual(examples[type]);
  });

  it('accepts the minimal forms of the optional fields', () => {
    expect(RunEventChunk.safeParse({ type: 'run.status', status: 'queued' }).success).toBe(true);
    expect(RunEventChunk.safeParse({ type: 'file.changed', path: 'a.txt', kind: 'added' }).success).toBe(true);
    expect(RunEventChunk.safeParse({ type: 'usage' }).success).toBe(true);
    expect(RunEventChunk.safeParse({ type: 'command.completed', item_id: 'i', exit_code: null }).success).toBe(true);
  });

  it('keeps raw and unknown fields so newer producers do not break readers', () => {
    const chunk = {
      type: 'message.delta',
      item_id: 'i1',
      delta: 'x',
      raw: { method: 'item/agentMessage/delta' },
      extra: 1,
    };
    expect(RunEventChunk.parse(chunk)).toEqual(chunk);
  });

  it('rejects unknown types and chunks missing required fields', () => {
    expect(RunEventChunk.safeParse({ type: 'message.started' }).success).toBe(false);
    expect(RunEventChunk.safeParse({ type: 'message.delta', item_id: 'i1' }).success).toBe(false);
    expect(RunEventChunk.safeParse({ type: 'run.status', status: 'done' }).success).toBe(false);
    expect(RunEventChunk.safeParse({ type: 'file.changed', path: 'a', kind: 'touched' }).success).toBe(false);
    expect(RunEventChunk.safeParse({ type: 'error', message: 'no code' }).success).toBe(false);
    expect(RunEventChunk.safeParse({ type: 'usage', totalTokens: -1 }).success).toBe(false);
  });

  it('lists each type once', () => {
    expect(new Set(RUN_EVENT_CHUNK_TYPES).size).toBe(RUN_EVENT_CHUNK_TYPES.length);
    expect(RUN_EVENT_CHUNK_TYPES).toHaveLength(16);
  });
});
