import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startModelProxy, type ModelProxy } from './model-proxy.js';

// The model endpoint as a jailed Claude Code reaches it: Anthropic's Messages API, with the key
// added outside as `x-api-key`, and nothing of the API beyond a turn, a token count and the model
// list: no files, servers, containers or tools of the provider's, no betas that switch them on, and
// billed as the run's model whatever the agent writes.

const KEY = 'sk-ant-proxy-test';
const received: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[] = [];
const refusals: string[] = [];
const lines: Record<string, unknown>[] = [];
let upstream: Server;
let proxy: ModelProxy;
let dir: string;

/** The betas Claude Code 2.1.328 sends on every turn, as measured. */
const CLAUDE_CODE_BETAS =
  'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24,thinking-display-updates-2026-08-18';

/** A streamed answer as the Messages API sends it, in events the upstream writes one at a time. */
const SSE_EVENTS = [
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"run-model","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}\n\n',
  'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
  'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}\n\n',
  'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
  'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}\n\n',
  'event: message_stop\ndata: {"type":"message_stop"}\n\n',
];

/** A request as Claude Code makes it: its own tools (no type), inline content, a tool's result. */
const claudeLike = () => ({
  model: 'run-model',
  max_tokens: 32000,
  thinking: { type: 'adaptive', display: 'updates' },
  context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
  output_config: { effort: 'high' },
  stream: true,
  system: [{ type: 'text', text: 'You are a Claude agent.', cache_control: { type: 'ephemeral' } }],
  tools: [
    // A tool's input schema is a JSON Schema: its property names are not content.
    {
      name: 'Read',
      description: 'Reads a file',
      input_schema: { type: 'object', properties: { file_id: { type: 'string' }, source: { type: 'string' } } },
    },
    { name: 'DeferredToolPlaceholder', description: 'x', input_schema: { type: 'object' }, defer_loading: true },
    { type: 'custom', name: 'Write', description: 'Writes a file', input_schema: { type: 'object' } },
  ],
  messages: [
    {
      role: 'user',
      content: [
        { type: 'text', text: 'make hello' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0K' } },
        { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'notes' } },
      ],
    },
    {
      role: 'assistant',
      content: [
        // The model's own tool call: its input is the harness's to act on, not the provider's.
        { type: 'tool_use', id: 'toolu_1', name: 'Fetch', input: { source: { type: 'url' }, file_id: 'file_1' } },
      ],
    },
    {
      role: 'user',
      content: [
        {
          type: 'tool_result',
          tool_use_id: 'toolu_1',
          content: [
            { type: 'text', text: 'done' },
            // A search result names where its text came from; nothing fetches it.
            {
              type: 'search_result',
              source: 'https://example.com/doc',
              title: 'doc',
              content: [{ type: 'text', text: 'found' }],
            },
          ],
        },
      ],
    },
  ],
});

function call(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath: proxy.socketPath,
        path,
        method,
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, headers: res.headers }));
      },
    );
    req.on('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const post = (path: string, body: unknown, headers?: Record<string, string>) => call('POST', path, body, headers);

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const streamed = req.url?.startsWith('/v1/messages?') && (JSON.parse(body) as { stream?: unknown }).stream;
      if (!streamed) {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
        return;
      }
      // One write per event, each after the last has gone out, as the provider streams them.
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const next = (i: number) => {
        if (i === SSE_EVENTS.length) return void res.end();
        res.write(SSE_EVENTS[i], () => setImmediate(() => next(i + 1)));
      };
      next(0);
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as { port: number };
  dir = mkdtempSync(join(tmpdir(), 'threadwork-model-proxy-messages-'));
  proxy = await startModelProxy(join(dir, 'model.sock'), {
    api: 'messages',
    baseUrl: `http://127.0.0.1:${port}`,
    apiKey: KEY,
    pin: { model: 'run-model', runId: 'run_messages_1' },
    logger: createLogger({
      service: 'model-proxy-test',
      destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    }),
    refused: (r) => refusals.push(r.reason),
  });
});
afterAll(async () => {
  await proxy?.close();
  await new Promise((resolve) => upstream?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe('the model proxy, Messages API', () => {
  it('forwards a turn with the key as x-api-key, not the agent’s own key, and streams the answer back intact', async () => {
    const res = await post('/v1/messages?beta=true', claudeLike(), {
      'x-api-key': 'sk-ant-agents-own',
      authorization: 'Bearer sk-ant-agents-own',
      'anthropic-beta': CLAUDE_CODE_BETAS,
      'x-claude-code-session-id': 'session-1',
      'x-stainless-retry-count': '0',
    });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.text).toBe(SSE_EVENTS.join(''));
    const last = received.at(-1)!;
    expect(last.url).toBe('/v1/messages?beta=true');
    expect(last.headers['x-api-key']).toBe(KEY);
    expect(last.headers.authorization).toBeUndefined();
    expect(last.headers['anthropic-version']).toBe('2023-06-01');
    expect(last.headers['x-claude-code-session-id']).toBe('session-1');
    expect(last.headers['x-stainless-retry-count']).toBe('0');
    // Every beta Claude Code sends reaches the model: the harness works as it does unproxied.
    expect(last.headers['anthropic-beta']).toBe(CLAUDE_CODE_BETAS);
    expect(JSON.parse(last.body)).toEqual(claudeLike());
  });

  it.each([
    ['POST', '/v1/messages'],
    ['POST', '/v1/messages?beta=true'],
    ['POST', '/v1/messages/count_tokens?beta=true'],
    ['GET', '/v1/models'],
    ['GET', '/v1/models?beta=true&limit=1000'],
    ['GET', '/v1/models/claude-sonnet-4-5'],
  ])('forwards %s %s', async (method, path) => {
    const before = received.length;
    const res = await call(method, path, method === 'POST' ? { ...claudeLike(), stream: false } : undefined);
    expect(res.status).toBe(200);
    expect(received.length).toBe(before + 1);
    expect(received.at(-1)).toMatchObject({ method, url: path });
  });

  it.each([
    ['POST', '/v1/files'],
    ['GET', '/v1/files/file_1/content'],
    ['POST', '/v1/messages/batches'],
    ['GET', '/v1/messages/batches/msgbatch_1/results'],
    ['POST', '/v1/skills'],
    ['GET', '/v1/organizations/me'],
    ['POST', '/v1/responses'],
    ['POST', '/messages'],
    ['GET', '/v1/messages'],
    ['POST', '/v1/models'],
    ['POST', '/v1/messages/../files'],
    ['POST', '/v1/messages/%2e%2e/files'],
    ['POST', '/v1/%6Dessages'],
    ['POST', '/v1/messages?beta=false'],
    ['POST', '/v1/messages?beta=true&beta=true'],
    ['POST', '/v1/messages?beta=true&anthropic-beta=files-api-2025-04-14'],
    ['GET', '/v1/models?after_id=%2e%2e'],
  ])('refuses %s %s, forwarding nothing', async (method, path) => {
    const before = received.length;
    const res = await call(method, path, method === 'POST' ? claudeLike() : undefined);
    expect(res.status).toBe(403);
    expect(received.length).toBe(before);
    expect(refusals.at(-1)).toBe('not a request of the model API');
  });

  const withContent = (...content: unknown[]) => ({ messages: [{ role: 'user', content }] });
  it.each([
    ['an MCP server of the agent’s', { mcp_servers: [{ type: 'url', url: 'https://evil.example/mcp', name: 'e' }] }],
    ['a code execution container of the account', { container: 'container_1' }],
    ['a container with skills', { container: { skills: [{ type: 'custom', skill_id: 'skill_1' }] } }],
    ['the provider’s web search', { tools: [{ type: 'web_search_20250305', name: 'web_search' }] }],
    ['the provider’s web fetch', { tools: [{ type: 'web_fetch_20250910', name: 'web_fetch' }] }],
    ['the provider’s code execution', { tools: [{ type: 'code_execution_20250825', name: 'code_execution' }] }],
    ['an MCP toolset', { tools: [{ type: 'mcp_toolset', mcp_server_name: 'e' }] }],
    ['a typed tool of Anthropic’s', { tools: [{ type: 'bash_20250124', name: 'bash' }] }],
    ['tools that are not a list', { tools: { name: 'x' } }],
    [
      'an image fetched from a URL',
      withContent({ type: 'image', source: { type: 'url', url: 'https://evil.example/?d=secret' } }),
    ],
    [
      'a document fetched from a URL',
      withContent({ type: 'document', source: { type: 'url', url: 'https://evil.example/d.pdf' } }),
    ],
    [
      'a document of the account’s files',
      withContent({ type: 'document', source: { type: 'file', file_id: 'file_1' } }),
    ],
    ['an image of the account’s files', withContent({ type: 'image', source: { type: 'file', file_id: 'file_1' } })],
    ['a file put in a container', withContent({ type: 'container_upload', file_id: 'file_1' })],
    [
      'a call of the provider’s tools',
      withContent({ type: 'server_tool_use', id: 's1', name: 'web_fetch', input: {} }),
    ],
    [
      'a result of the provider’s tools',
      withContent({ type: 'web_fetch_tool_result', tool_use_id: 's1', content: {} }),
    ],
    // Content nests in a tool's result, a document's content and the system prompt as in a message.
    [
      'an image fetched from a URL in a tool’s result',
      withContent({
        type: 'tool_result',
        tool_use_id: 't1',
        content: [{ type: 'image', source: { type: 'url', url: 'https://evil.example/?d=secret' } }],
      }),
    ],
    [
      'a file inside a document’s content',
      withContent({
        type: 'document',
        source: { type: 'content', content: [{ type: 'image', source: { type: 'file', file_id: 'file_1' } }] },
      }),
    ],
    [
      'a document fetched from a URL in the system prompt',
      { system: [{ type: 'document', source: { type: 'url', url: 'https://evil.example/' } }] },
    ],
  ])('refuses %s, forwarding nothing, and says why', async (_what, change) => {
    for (const path of ['/v1/messages?beta=true', '/v1/messages/count_tokens?beta=true']) {
      const before = received.length;
      const res = await post(path, { ...claudeLike(), ...change });
      expect(res.status).toBe(403);
      expect(res.text).toMatch(/^refused: /);
      expect(received.length).toBe(before);
      expect(refusals.at(-1)).toBe(res.text.replace(/^refused: /, '').trim());
    }
  });

  it('bills every request as the run’s model with the account’s defaults, keeps the harness’s own limits, and logs it with the run', async () => {
    const asked = {
      ...claudeLike(),
      model: 'the-most-expensive-model',
      service_tier: 'auto',
      speed: 'fast',
      inference_geo: 'us',
    };
    for (const path of ['/v1/messages?beta=true', '/v1/messages/count_tokens?beta=true']) {
      expect((await post(path, asked)).status).toBe(200);
      const got = JSON.parse(received.at(-1)!.body) as Record<string, unknown>;
      // max_tokens and thinking are the harness's loop's, and stay; nothing else changed either.
      expect(got).toEqual(claudeLike());
    }
    expect(lines).toContainEqual(
      expect.objectContaining({
        run_id: 'run_messages_1',
        asked: { model: 'the-most-expensive-model', service_tier: 'auto', speed: 'fast', inference_geo: 'us' },
        model: 'run-model',
      }),
    );
  });

  it('forwards only the betas a harness needs, and logs those it removed once', async () => {
    const asked = `${CLAUDE_CODE_BETAS}, files-api-2025-04-14,mcp-client-2025-11-20,fast-mode-2026-02-01,context-1m-2025-08-07`;
    for (let i = 0; i < 2; i++) {
      expect((await post('/v1/messages?beta=true', claudeLike(), { 'anthropic-beta': asked })).status).toBe(200);
      expect(received.at(-1)!.headers['anthropic-beta']).toBe(CLAUDE_CODE_BETAS);
    }
    const notes = lines.filter((line) => Array.isArray(line.removed));
    expect(notes).toEqual([
      expect.objectContaining({
        run_id: 'run_messages_1',
        removed: ['files-api-2025-04-14', 'mcp-client-2025-11-20', 'fast-mode-2026-02-01', 'context-1m-2025-08-07'],
      }),
    ]);
    // A request that asks for no beta the proxy forwards goes without the header.
    expect((await post('/v1/messages', claudeLike(), { 'anthropic-beta': 'skills-2025-10-02' })).status).toBe(200);
    expect(received.at(-1)!.headers).not.toHaveProperty('anthropic-beta');
  });
});
