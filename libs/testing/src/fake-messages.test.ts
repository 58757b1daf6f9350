import Anthropic, { APIError, APIUserAbortError } from '@anthropic-ai/sdk';
import type { RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages';
import { blockEvents, messageEndEvents, messageStartEvent } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from './wait.js';
import { say, turnScript, write } from './fake-messages-script.js';
import { startFakeMessages, type FakeMessagesServer } from './fake-messages.js';

// The fake Messages API held against Anthropic's published client: what the client accumulates
// from the fake's stream is what it would from the real API, so Claude Code (built on the same
// client) reads it the same way.

// The events the writer emits must be events of the published schema: a field renamed, missing or
// of another type there fails the type check.
const writtenEvents = [
  messageStartEvent({ id: 'msg_1', model: 'm', inputTokens: 1 }),
  ...blockEvents(0, { type: 'text', text: 'hi' }),
  ...blockEvents(1, { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls' } }),
  ...messageEndEvents({ stopReason: 'tool_use', outputTokens: 3 }),
] satisfies RawMessageStreamEvent[];

describe('fake Messages API', () => {
  let fake: FakeMessagesServer;
  let client: Anthropic;

  beforeAll(async () => {
    fake = await startFakeMessages(() => [say('nothing scripted')]);
    client = new Anthropic({ apiKey: 'sk-fake-test', baseURL: fake.baseUrl, maxRetries: 0 });
  });
  afterAll(() => fake.close());

  it('writes the events of an answer in the order the API sends them', () => {
    expect(writtenEvents.map((e) => e.type)).toEqual([
      'message_start',
      ...['content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop'],
      ...['content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop'],
      'message_delta',
      'message_stop',
    ]);
  });

  it('streams text and a tool call that the client accumulates into the final message', async () => {
    fake.setScript(turnScript([[say('Writing the file.'), write('/tmp/out.txt', 'hello\n')], [say('Done.')]]));
    const stream = client.messages.stream({
      model: 'claude-test',
      max_tokens: 1024,
      system: 'be brief',
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: '<system-reminder>x</system-reminder>' },
            { type: 'text', text: 'make the file' },
          ],
        },
      ],
    });
    const texts: string[] = [];
    stream.on('text', (delta) => texts.push(delta));
    const message = await stream.finalMessage();

    expect(texts.join('')).toBe('Writing the file.');
    expect(message.stop_reason).toBe('tool_use');
    expect(message.model).toBe('claude-test');
    expect(message.usage.input_tokens).toBeGreaterThan(0);
    expect(message.usage.output_tokens).toBeGreaterThan(0);
    expect(message.content).toHaveLength(2);
    expect(message.content[0]).toMatchObject({ type: 'text', text: 'Writing the file.' });
    const call = message.content[1];
    expect(call).toMatchObject({
      type: 'tool_use',
      name: 'Write',
      input: { file_path: '/tmp/out.txt', content: 'hello\n' },
    });
    expect(call?.type === 'tool_use' && call.id).toMatch(/^toolu_/);

    const seen = fake.requests.at(-1);
    expect(seen).toMatchObject({
      lastUserText: 'make the file',
      system: 'be brief',
      model: 'claude-test',
      authorization: 'Bearer sk-fake-test',
      toolResultsSinceLastUser: [],
    });

    // The tool's result goes back as a user message; the turn's next step answers it.
    const toolUseId = call?.type === 'tool_use' ? call.id : '';
    const next = await client.messages
      .stream({
        model: 'claude-test',
        max_tokens: 1024,
        messages: [
          { role: 'user', content: 'make the file' },
          { role: 'assistant', content: message.content },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: toolUseId, content: 'written' }] },
        ],
      })
      .finalMessage();
    expect(next.stop_reason).toBe('end_turn');
    expect(next.content).toMatchObject([{ type: 'text', text: 'Done.' }]);
    expect(fake.requests.at(-1)?.toolResultsSinceLastUser).toEqual([
      { tool_use_id: toolUseId, content: 'written', is_error: false },
    ]);
  });

  it('gives a re-sent request the same tool use ids', async () => {
    fake.setScript(() => [write('/tmp/a', 'a'), write('/tmp/b', 'b')]);
    const ask = () =>
      client.messages
        .stream({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'again' }] })
        .finalMessage();
    const ids = async () => (await ask()).content.map((b) => (b.type === 'tool_use' ? b.id : ''));
    const first = await ids();
    expect(new Set(first).size).toBe(2);
    expect(await ids()).toEqual(first);
  });

  it('streams the blocks of a held answer before it completes, and lets the client leave it', async () => {
    fake.setScript(() => ({ blocks: [say('Working on it.')], delayMs: 600_000 }));
    const stream = client.messages.stream({
      model: 'claude-test',
      max_tokens: 10,
      messages: [{ role: 'user', content: 'take long' }],
    });
    const texts: string[] = [];
    stream.on('text', (delta) => texts.push(delta));
    const ended = stream.finalMessage().catch((err: unknown) => err);
    await waitFor('the held text', () => texts.join('') === 'Working on it.');
    stream.abort();
    expect(await ended).toBeInstanceOf(APIUserAbortError);
  });

  it('answers an error status as the API does, which the client raises as an APIError', async () => {
    fake.setScript(() => ({ status: 529, message: 'overloaded for the test' }));
    const failed = await client.messages
      .stream({ model: 'claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
      .finalMessage()
      .catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(APIError);
    expect(failed).toMatchObject({
      status: 529,
      error: { type: 'error', error: { type: 'overloaded_error', message: 'overloaded for the test' } },
    });
  });
});
