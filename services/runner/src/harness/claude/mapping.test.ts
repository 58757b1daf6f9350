import type { SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import { describe, expect, it } from 'vitest';
import { ClaudeTurnMapper } from './mapping.js';

// Messages as Claude Code 2.1.328 sent them through the Agent SDK 0.3.328 (recorded against the fake
// Messages API, trimmed to what the mapper reads).

const cwd = '/work/repo';
const mapper = (cap = 1024) => new ClaudeTurnMapper({ cwd, outputCapBytes: cap, includeRaw: false });

function assistant(id: string, block: object): SDKMessage {
  return {
    type: 'assistant',
    message: { id, type: 'message', role: 'assistant', content: [block], stop_reason: null },
    parent_tool_use_id: null,
    uuid: '4c3763a5-851d-4599-b52f-25cfe1014903',
    session_id: 's',
  } as unknown as SDKMessage;
}

function toolResult(id: string, content: unknown, structured?: unknown, isError?: boolean): SDKMessage {
  return {
    type: 'user',
    message: {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: id, content, ...(isError === undefined ? {} : { is_error: isError }) },
      ],
    },
    parent_tool_use_id: null,
    tool_use_result: structured,
    session_id: 's',
  } as unknown as SDKMessage;
}

function streamEvent(event: object): SDKMessage {
  return { type: 'stream_event', event, parent_tool_use_id: null, uuid: 'u', session_id: 's' } as unknown as SDKMessage;
}

describe('ClaudeTurnMapper', () => {
  it('streams text as deltas of one item and completes it with the whole text, the last one the reply', () => {
    const m = mapper();
    const chunks = [
      streamEvent({ type: 'message_start', message: { id: 'msg_1' } }),
      streamEvent({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
      streamEvent({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Wri' } }),
      streamEvent({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'ting.' } }),
      assistant('msg_1', { type: 'text', text: 'Writing.' }),
    ].flatMap((msg) => m.map(msg));
    expect(chunks).toEqual([
      { type: 'message.delta', item_id: 'msg_1_0', delta: 'Wri' },
      { type: 'message.delta', item_id: 'msg_1_0', delta: 'ting.' },
      { type: 'message.completed', item_id: 'msg_1_0', text: 'Writing.' },
    ]);
    expect(m.lastReply).toEqual({ itemId: 'msg_1_0', text: 'Writing.' });
  });

  it('gives each block of a response the item id of its index', () => {
    const m = mapper();
    m.map(assistant('msg_1', { type: 'text', text: 'Writing.' }));
    const second = m.map(
      assistant('msg_1', { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } }),
    );
    expect(second).toEqual([{ type: 'command.started', item_id: 'toolu_1', command: 'ls' }]);
    expect(m.map(assistant('msg_2', { type: 'text', text: 'Done.' }))).toEqual([
      { type: 'message.completed', item_id: 'msg_2_0', text: 'Done.' },
    ]);
  });

  it('maps a command that succeeds to its output and exit code 0', () => {
    const m = mapper();
    m.map(assistant('msg_1', { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'echo hi' } }));
    const chunks = m.map(toolResult('toolu_1', 'hi', { stdout: 'hi', stderr: 'warn', interrupted: false }, false));
    expect(chunks).toEqual([
      { type: 'command.output', item_id: 'toolu_1', delta: 'hi\nwarn' },
      { type: 'command.completed', item_id: 'toolu_1', exit_code: 0 },
    ]);
  });

  it('reads a failed command’s exit code from its result and keeps the rest as output', () => {
    const m = mapper();
    m.map(assistant('msg_1', { type: 'tool_use', id: 'toolu_4', name: 'Bash', input: { command: 'exit 3' } }));
    const chunks = m.map(toolResult('toolu_4', 'Exit code 3\nout\nerr', 'Error: Exit code 3\nout\nerr', true));
    expect(chunks).toEqual([
      { type: 'command.output', item_id: 'toolu_4', delta: 'out\nerr' },
      { type: 'command.completed', item_id: 'toolu_4', exit_code: 3 },
    ]);
  });

  it('cuts a command’s output at the cap with a note', () => {
    const m = mapper(1024);
    m.map(assistant('msg_1', { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'yes' } }));
    const chunks = m.map(toolResult('toolu_1', 'y', { stdout: 'y\n'.repeat(2000), stderr: '' }, false));
    const output = chunks.filter((c) => c.type === 'command.output');
    expect(output.at(-1)).toMatchObject({ truncated: true });
    expect(
      output
        .slice(0, -1)
        .map((c) => (c as { delta: string }).delta)
        .join(''),
    ).toHaveLength(1024);
  });

  it('reports files written and edited, relative to the workspace, new ones as added', () => {
    const m = mapper();
    m.map(
      assistant('msg_1', {
        type: 'tool_use',
        id: 't1',
        name: 'Write',
        input: { file_path: `${cwd}/hello.txt`, content: 'hi\n' },
      }),
    );
    m.map(
      assistant('msg_2', {
        type: 'tool_use',
        id: 't2',
        name: 'Edit',
        input: { file_path: `${cwd}/a.txt`, old_string: 'two', new_string: 'TWO' },
      }),
    );
    expect(
      m.map(toolResult('t1', 'File created successfully', { type: 'create', filePath: `${cwd}/hello.txt` })),
    ).toEqual([{ type: 'file.changed', item_id: 't1', path: 'hello.txt', kind: 'added' }]);
    expect(
      m.map(toolResult('t2', 'The file has been updated', { filePath: `${cwd}/a.txt`, structuredPatch: [] })),
    ).toEqual([{ type: 'file.changed', item_id: 't2', path: 'a.txt', kind: 'modified' }]);
  });

  it('reports no change for a file tool that failed', () => {
    const m = mapper();
    m.map(assistant('msg_1', { type: 'tool_use', id: 't1', name: 'Edit', input: { file_path: `${cwd}/a.txt` } }));
    expect(m.map(toolResult('t1', '<tool_use_error>String not found</tool_use_error>', 'Error', true))).toEqual([]);
  });

  it('turns the todo list into the plan', () => {
    const m = mapper();
    const todos = [
      { content: 'do a', status: 'completed', activeForm: 'doing a' },
      { content: 'do b', status: 'in_progress', activeForm: 'doing b' },
      { content: 'do c', status: 'pending', activeForm: 'doing c' },
    ];
    expect(m.map(assistant('msg_1', { type: 'tool_use', id: 't1', name: 'TodoWrite', input: { todos } }))).toEqual([
      {
        type: 'plan.updated',
        plan: [
          { step: 'do a', status: 'completed' },
          { step: 'do b', status: 'in_progress' },
          { step: 'do c', status: 'pending' },
        ],
      },
    ]);
  });

  it('leaves out a subagent’s messages and the echo of a prompt', () => {
    const m = mapper();
    const sub = { ...(assistant('msg_9', { type: 'text', text: 'inner' }) as object), parent_tool_use_id: 'toolu_x' };
    expect(m.map(sub as SDKMessage)).toEqual([]);
    const echo = {
      type: 'user',
      isReplay: true,
      message: { role: 'user', content: 'go' },
      parent_tool_use_id: null,
      uuid: 'u',
      session_id: 's',
    };
    expect(m.map(echo as unknown as SDKMessage)).toEqual([]);
  });

  it('leaves out the message Claude Code makes of a failed model call (the turn’s error says it)', () => {
    const m = mapper();
    const failed = assistant('f1', { type: 'text', text: 'API Error: 500 boom.' }) as unknown as {
      error?: string;
      message: { model: string };
    };
    failed.error = 'server_error';
    failed.message.model = '<synthetic>';
    expect(m.map(failed as unknown as SDKMessage)).toEqual([]);
    expect(m.lastReply).toBeNull();
  });

  it('adds up the usage of each result, cache reads counted as input, and its cost', () => {
    const m = mapper();
    expect(m.usage).toEqual({});
    m.addUsage(
      { input_tokens: 10, output_tokens: 5, cache_read_input_tokens: 100, cache_creation_input_tokens: 0 },
      0.25,
    );
    const chunk = m.addUsage({ input_tokens: 20, output_tokens: 5 }, 0.5);
    expect(chunk).toEqual({ type: 'usage', inputTokens: 130, outputTokens: 10, totalTokens: 140, costUsd: 0.75 });
    expect(m.usage).toEqual({ inputTokens: 130, outputTokens: 10, totalTokens: 140, costUsd: 0.75 });
  });
});
