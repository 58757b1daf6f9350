import { describe, expect, it } from 'vitest';
import type { ServerNotification } from '@threadwork/codex-protocol';
import { CodexTurnMapper, toQuestion } from './mapping.js';

// Notifications as codex app-server 0.169 sent them in a recorded turn (trimmed to what is read).
const n = (method: string, params: Record<string, unknown>) =>
  ({ method, params: { threadId: 't', turnId: 'u', ...params } }) as unknown as ServerNotification;

const command = (status: string, extra: Record<string, unknown> = {}) => ({
  type: 'commandExecution',
  id: 'call_0',
  command: "/bin/bash -lc 'echo hello; ls'",
  cwd: '/ws',
  status,
  aggregatedOutput: null,
  exitCode: null,
  durationMs: null,
  ...extra,
});

const mapper = (opts: Partial<{ cap: number; raw: boolean }> = {}) =>
  new CodexTurnMapper({ cwd: '/ws', outputCapBytes: opts.cap ?? 1024, includeRaw: opts.raw ?? false });

describe('codex notifications → run event chunks', () => {
  it('maps an assistant message: deltas, then the full text, remembered as the reply', () => {
    const m = mapper();
    expect(m.map(n('item/agentMessage/delta', { itemId: 'm1', delta: 'don' }))).toEqual([
      { type: 'message.delta', item_id: 'm1', delta: 'don' },
    ]);
    expect(m.map(n('item/completed', { item: { type: 'agentMessage', id: 'm1', text: 'done!' } }))).toEqual([
      { type: 'message.completed', item_id: 'm1', text: 'done!' },
    ]);
    expect(m.lastReply).toEqual({ itemId: 'm1', text: 'done!' });
    expect(m.map(n('item/reasoning/summaryTextDelta', { itemId: 'r1', delta: 'hmm', summaryIndex: 0 }))).toEqual([
      { type: 'reasoning.delta', item_id: 'r1', delta: 'hmm' },
    ]);
  });

  it('maps a command: started, output (from deltas, or the aggregate when none came), completed', () => {
    const m = mapper();
    expect(m.map(n('item/started', { item: command('inProgress') }))).toEqual([
      { type: 'command.started', item_id: 'call_0', command: "/bin/bash -lc 'echo hello; ls'" },
    ]);
    expect(
      m.map(
        n('item/completed', {
          item: command('completed', { aggregatedOutput: 'hello\n', exitCode: 0, durationMs: 3 }),
        }),
      ),
    ).toEqual([
      { type: 'command.output', item_id: 'call_0', delta: 'hello\n' },
      { type: 'command.completed', item_id: 'call_0', exit_code: 0, duration_ms: 3 },
    ]);

    const streamed = mapper();
    expect(streamed.map(n('item/commandExecution/outputDelta', { itemId: 'call_0', delta: 'hel' }))).toHaveLength(1);
    // The last piece never came as a delta: it is taken from the aggregate.
    expect(
      streamed.map(n('item/completed', { item: command('failed', { aggregatedOutput: 'hello', exitCode: 2 }) })),
    ).toEqual([
      { type: 'command.output', item_id: 'call_0', delta: 'lo' },
      { type: 'command.completed', item_id: 'call_0', exit_code: 2 },
    ]);
  });

  /** The command's output as a reader rebuilds it from the chunks: pieces in order, `replace` starting over. */
  const rebuilt = (chunks: readonly unknown[]) =>
    chunks
      .map((c) => c as { type: string; delta?: string; replace?: boolean })
      .filter((c) => c.type === 'command.output')
      .reduce((text, c) => (c.replace ? '' : text) + (c.delta ?? ''), '');

  const run = (m: CodexTurnMapper, deltas: string[], whole: string) => [
    ...deltas.flatMap((delta) => m.map(n('item/commandExecution/outputDelta', { itemId: 'call_0', delta }))),
    ...m.map(n('item/completed', { item: command('completed', { aggregatedOutput: whole, exitCode: 0 }) })),
  ];

  it.each([
    ['all of it as deltas', ['line 1\n', 'line 2\n', 'line 3\n']],
    ['none of it as deltas', []],
    ['its first piece missing', ['line 2\n', 'line 3\n']],
    ['its last piece missing', ['line 1\n', 'line 2\n']],
    ['a middle piece missing', ['line 1\n', 'line 3\n']],
  ])('carries the whole output of a command with %s, once', (_what, deltas) => {
    const whole = 'line 1\nline 2\nline 3\n';
    const chunks = run(mapper(), deltas, whole);
    expect(rebuilt(chunks)).toBe(whole);
    expect(chunks.at(-1)).toMatchObject({ type: 'command.completed' });
  });

  it('keeps the cap when the whole output has to be sent again, and notes the cut once', () => {
    const whole = 'é'.repeat(10); // 20 bytes
    const chunks = run(mapper({ cap: 7 }), ['éé', 'éé'].slice(1), whole);
    expect(rebuilt(chunks)).toBe('ééé\n[output cut at 7 bytes]\n');
    expect(chunks.filter((c) => (c as { truncated?: boolean }).truncated)).toHaveLength(1);
  });

  it('caps what one command forwards and notes the cut once', () => {
    const m = mapper({ cap: 4 });
    const out = [
      ...m.map(n('item/commandExecution/outputDelta', { itemId: 'c', delta: 'abc' })),
      ...m.map(n('item/commandExecution/outputDelta', { itemId: 'c', delta: 'defgh' })),
      ...m.map(n('item/commandExecution/outputDelta', { itemId: 'c', delta: 'ijk' })),
    ];
    expect(out.map((c) => (c as { delta: string }).delta)).toEqual(['abc', 'd', '\n[output cut at 4 bytes]\n']);
  });

  it('maps file changes relative to the workspace, with git’s vocabulary', () => {
    const m = mapper();
    const item = {
      type: 'fileChange',
      id: 'call_1',
      status: 'completed',
      changes: [
        { path: '/ws/new.txt', kind: { type: 'add' }, diff: '' },
        { path: '/ws/src/a.ts', kind: { type: 'update', move_path: null }, diff: '' },
        { path: '/ws/old.ts', kind: { type: 'update', move_path: '/ws/new.ts' }, diff: '' },
        { path: '/elsewhere/x', kind: { type: 'delete' }, diff: '' },
      ],
    };
    expect(m.map(n('item/completed', { item }))).toEqual([
      { type: 'file.changed', item_id: 'call_1', path: 'new.txt', kind: 'added' },
      { type: 'file.changed', item_id: 'call_1', path: 'src/a.ts', kind: 'modified' },
      { type: 'file.changed', item_id: 'call_1', path: 'new.ts', kind: 'renamed' },
      { type: 'file.changed', item_id: 'call_1', path: '/elsewhere/x', kind: 'deleted' },
    ]);
    expect(m.map(n('item/completed', { item: { ...item, status: 'failed' } }))).toEqual([]);
  });

  it('sums the usage of each model response of the turn', () => {
    const m = mapper();
    const usage = (input: number, output: number) =>
      n('thread/tokenUsage/updated', {
        tokenUsage: {
          total: { inputTokens: 9999, outputTokens: 9999, totalTokens: 19998 },
          last: { inputTokens: input, outputTokens: output, totalTokens: input + output },
          modelContextWindow: null,
        },
      });
    expect(m.usage).toEqual({});
    m.map(usage(100, 10));
    expect(m.map(usage(100, 2))).toEqual([{ type: 'usage', inputTokens: 200, outputTokens: 12, totalTokens: 212 }]);
    expect(m.usage).toEqual({ inputTokens: 200, outputTokens: 12, totalTokens: 212 });
  });

  it('maps plan updates and errors, and keeps the native payload only when asked', () => {
    const m = mapper({ raw: true });
    const plan = n('turn/plan/updated', {
      explanation: null,
      plan: [
        { step: 'read', status: 'completed' },
        { step: 'write', status: 'inProgress' },
      ],
    });
    expect(m.map(plan)).toEqual([
      {
        type: 'plan.updated',
        plan: [
          { step: 'read', status: 'completed' },
          { step: 'write', status: 'in_progress' },
        ],
        explanation: null,
        raw: plan.params,
      },
    ]);
    expect(
      mapper().map(
        n('error', { error: { message: 'high demand', codexErrorInfo: 'internalServerError' }, willRetry: false }),
      ),
    ).toEqual([
      {
        type: 'error',
        code: 'harness_error',
        message: 'high demand',
        detail: 'internalServerError',
        will_retry: false,
      },
    ]);
    expect(mapper().map(n('thread/status/changed', { status: { type: 'idle' } }))).toEqual([]);
  });

  it('takes Codex questions as the contract’s questions', () => {
    expect(
      toQuestion({ id: 'q', header: 'H', question: 'Which?', isOther: true, isSecret: false, options: null }),
    ).toEqual({ id: 'q', header: 'H', question: 'Which?', isOther: true, isSecret: false, options: [] });
  });
});
