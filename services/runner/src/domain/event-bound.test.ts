import { RunEventChunk } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import { boundEvent, EVENT_MAX_BYTES } from './event-bound.js';

// Events whose nested values the agent made up: each comes out within the byte bound, as shallow
// and narrow as the bounds say, and valid against its contract.

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');

/** Objects nested `levels` deep, built without recursion (as JSON.parse would hand them over). */
function deep(levels: number): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  let node = root;
  for (let i = 0; i < levels; i++) {
    const next: Record<string, unknown> = {};
    node.a = next;
    node = next;
  }
  node.leaf = 'x'.repeat(1000);
  return root;
}

/** How deep the objects and arrays of a value go (the value itself is 0). */
function depthOf(value: unknown): number {
  if (typeof value !== 'object' || value === null) return -1;
  const children = Array.isArray(value) ? value : Object.values(value);
  return 1 + Math.max(-1, ...children.map(depthOf));
}

/** The longest array anywhere in a value. */
function widestArray(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children = Array.isArray(value) ? value : Object.values(value);
  return Math.max(Array.isArray(value) ? value.length : 0, ...children.map(widestArray));
}

const cases: [string, Record<string, unknown>][] = [
  [
    'a plan of a hundred thousand long steps',
    {
      type: 'plan.updated',
      plan: Array.from({ length: 100_000 }, (_, i) => ({ step: `${i} ${'s'.repeat(2000)}`, status: 'pending' })),
    },
  ],
  [
    'plan steps each carrying a deep and wide extra field before their own',
    {
      type: 'plan.updated',
      plan: Array.from({ length: 300 }, () => ({
        extra: { list: Array.from({ length: 5000 }, () => deep(20)) },
        step: 'do it',
        status: 'in_progress',
      })),
    },
  ],
  [
    'tool arguments nested a hundred thousand levels deep in raw',
    { type: 'command.started', item_id: 'item_1', command: 'ls', raw: { params: { arguments: deep(100_000) } } },
  ],
  [
    'a raw of a million empty objects',
    {
      type: 'message.delta',
      item_id: 'item_2',
      delta: 'hi',
      raw: { items: Array.from({ length: 1_000_000 }, () => ({})) },
    },
  ],
  [
    'a reply of control characters, six bytes each once escaped',
    { type: 'message.completed', item_id: 'item_3', text: '\u0001'.repeat(200_000) },
  ],
  [
    'extra top-level fields crowding the ones the contract requires',
    {
      type: 'network.refused',
      ...Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`x${i}`, 'y'.repeat(1000)])),
      host: 'h'.repeat(100_000),
      port: 443,
      reason: 'r'.repeat(100_000),
    },
  ],
  ['a key of a megabyte', { type: 'command.output', item_id: 'item_4', delta: 'out', ['k'.repeat(1_000_000)]: 1 }],
  [
    'layers of many long names',
    {
      type: 'sandbox.ready',
      sandbox_id: 'sbx_1',
      layers: Array.from({ length: 50_000 }, () => 'l'.repeat(500)),
      egress: 'none',
    },
  ],
  [
    'a failed status of a long message, and a deep raw',
    {
      type: 'run.status',
      status: 'failed',
      error: { code: 'x', message: 'm'.repeat(70_000), detail: 'd' },
      raw: deep(50),
    },
  ],
];

describe('boundEvent', () => {
  it.each(cases)('keeps %s within the bound, shallow, narrow and valid', (_what, event) => {
    const { chunk, size } = boundEvent(event);
    expect(bytes(chunk)).toBe(size);
    expect(size).toBeLessThanOrEqual(EVENT_MAX_BYTES);
    expect(depthOf(chunk)).toBeLessThanOrEqual(9);
    expect(widestArray(chunk)).toBeLessThanOrEqual(256);
    const parsed = RunEventChunk.safeParse(chunk);
    expect(parsed.success, JSON.stringify(parsed.error?.issues.slice(0, 3))).toBe(true);
    expect(chunk.type).toBe(event.type);
    expect(chunk.truncated).toBe(true);
  });

  it('keeps what the contract requires of a plan, and as many steps as fit', () => {
    const { chunk } = boundEvent(cases[1]![1]);
    const plan = chunk.plan as { step: string; status: string }[];
    expect(plan.length).toBeGreaterThan(0);
    for (const step of plan) expect(step).toMatchObject({ step: 'do it', status: 'in_progress' });
  });

  it('leaves an event within its bounds as it is', () => {
    const event = {
      type: 'plan.updated',
      plan: [{ step: 'one', status: 'completed' }],
      raw: { method: 'turn/plan/updated', params: { plan: [{ step: 'one', status: 'completed' }] } },
    };
    expect(boundEvent(event)).toEqual({ chunk: event, size: bytes(event) });
  });

  it('cuts nesting even in an event that is small', () => {
    const event = { type: 'command.started', item_id: 'item_5', command: 'ls', raw: deep(200) };
    const { chunk } = boundEvent(event);
    expect(depthOf(chunk)).toBeLessThanOrEqual(9);
    expect(chunk.truncated).toBe(true);
    expect(chunk.command).toBe('ls');
  });

  it('keeps a key named __proto__ as data', () => {
    const event = JSON.parse('{"type":"command.started","item_id":"i","command":"ls","raw":{"__proto__":{"x":1}}}');
    const { chunk } = boundEvent({ ...event, raw: { ...event.raw, deep: deep(50) } });
    expect(chunk.truncated).toBe(true);
    expect(Object.hasOwn(chunk.raw as object, '__proto__')).toBe(true);
    expect(JSON.stringify(chunk)).toContain('"__proto__":{"x":1}');
  });
});
