import Anthropic from '@anthropic-ai/sdk';
import type { Message } from '@anthropic-ai/sdk/resources/messages';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoModel, type DemoModel } from './server.js';

// The demo model over HTTP, its Messages answers held against Anthropic's published client:
// streamed, and whole for a request that asks for no stream (Claude Code's model check).

describe('the demo model', () => {
  let model: DemoModel;
  let client: Anthropic;
  beforeAll(async () => {
    model = await startDemoModel();
    client = new Anthropic({ apiKey: 'unused', baseURL: model.messagesUrl, maxRetries: 0 });
  });
  afterAll(() => model.close());

  const turn = {
    model: 'demo-scripted',
    max_tokens: 1024,
    system: 'Primary working directory: /work/app',
    tools: [{ name: 'Bash', input_schema: { type: 'object' as const } }],
    messages: [{ role: 'user' as const, content: 'Fix it' }],
  };

  it('streams the next step of the run the session is in, as the client accumulates it', async () => {
    model.onTurn('session-1', 'run_7');
    const message = await client.messages
      .stream(turn, { headers: { 'x-claude-code-session-id': 'session-1' } })
      .finalMessage();
    expect(message.stop_reason).toBe('tool_use');
    expect(message.model).toBe('demo-scripted');
    expect(message.content.at(-1)).toMatchObject({ type: 'tool_use', id: 'toolu_tw_demo_run_7_look', name: 'Bash' });

    // The turn over, the session names no run.
    model.onTurn('session-1', null);
    const after = await client.messages
      .stream(turn, { headers: { 'x-claude-code-session-id': 'session-1' } })
      .finalMessage();
    expect(after.content.at(-1)).toMatchObject({ id: 'toolu_tw_demo_unknown_look' });
  });

  it('answers a request without a stream with one JSON message', async () => {
    const check: Message = await client.messages.create({
      model: 'demo-scripted',
      max_tokens: 1,
      messages: [{ role: 'user', content: 'test' }],
    });
    expect(check).toMatchObject({
      type: 'message',
      role: 'assistant',
      model: 'demo-scripted',
      stop_reason: 'end_turn',
      content: [{ type: 'text', text: expect.stringContaining('scripted') }],
    });
    const step = await client.messages.create(turn);
    expect(step.stop_reason).toBe('tool_use');
    expect(step.content.at(-1)).toMatchObject({
      type: 'tool_use',
      name: 'Bash',
      input: { command: expect.any(String) },
    });
  });

  it('still answers Codex at /v1/responses, and refuses other paths in the Messages error shape', async () => {
    const res = await fetch(`${model.baseUrl}/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ input: [{ type: 'message', role: 'user', content: 'Fix it' }] }),
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    expect(await res.text()).toContain('tw_demo_unknown_look');
    const missing = await fetch(`${model.messagesUrl}/v1/other`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
  });
});
