import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Socket } from 'node:net';
import { say, startFakeModel, type FakeModelServer } from '@threadwork/testing';
import { MAX_CONNECTIONS, startModelProxy, type ModelProxy } from './model-proxy.js';

// The model endpoint as the jail reaches it: the key is added outside, and what the agent may
// write in a request's body and headers is what a harness sends, nothing that makes the provider
// fetch a URL, read what the key's account stores, or bill another organisation.

const KEY = 'sk-proxy-test';
const received: { headers: IncomingHttpHeaders; body: string }[] = [];
let upstream: Server;
let proxy: ModelProxy;
let dir: string;
const refusals: string[] = [];

/** A request as Codex makes it: its own function tools, inline input, nothing stored. */
const codexLike = () => ({
  model: 'test-model',
  stream: true,
  store: false,
  input: [
    { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello' }] },
    { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'data:image/png;base64,iVBORw0K' }] },
  ],
  tools: [
    // A tool's parameters are a JSON Schema: its property names are not content.
    {
      type: 'function',
      name: 'view_image',
      parameters: { type: 'object', properties: { image_url: { type: 'string' }, file_id: { type: 'string' } } },
    },
    { type: 'function', name: 'exec_command' },
    { type: 'custom', name: 'apply_patch' },
    { type: 'namespace', name: 'multi_agent_v1' },
  ],
  include: ['reasoning.encrypted_content'],
});

function post(
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath: proxy.socketPath,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

beforeAll(async () => {
  upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as { port: number };
  dir = mkdtempSync(join(tmpdir(), 'threadwork-model-proxy-'));
  proxy = await startModelProxy(join(dir, 'model.sock'), {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    apiKey: KEY,
    pin: { model: 'test-model' },
    logger: createLogger({ service: 'model-proxy-test', level: 'silent' }),
    refused: (r) => refusals.push(r.reason),
  });
});
afterAll(async () => {
  await proxy?.close();
  await new Promise((resolve) => upstream?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe('the model proxy', () => {
  it('forwards a harness’s request with the key, and not the organisation or project the agent names', async () => {
    const res = await post('/v1/responses', codexLike(), {
      authorization: 'Bearer sk-agents-own',
      'openai-organization': 'org-attacker',
      'openai-project': 'proj-attacker',
    });
    expect(res.status).toBe(200);
    const last = received.at(-1)!;
    expect(last.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(last.headers['openai-organization']).toBeUndefined();
    expect(last.headers['openai-project']).toBeUndefined();
    expect(JSON.parse(last.body)).toEqual(codexLike());
  });

  it.each([
    ['an MCP server of the agent’s', { tools: [{ type: 'mcp', server_url: 'https://evil.example/mcp' }] }],
    ['the provider’s web search', { tools: [{ type: 'web_search' }] }],
    ['the account’s files', { tools: [{ type: 'file_search', vector_store_ids: ['vs_1'] }] }],
    [
      'an image fetched from a URL',
      { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://evil.example/?d=secret' }] }] },
    ],
    ['a file of the account', { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] }],
    ['a stored response', { previous_response_id: 'resp_1' }],
    ['a stored item', { input: [{ type: 'item_reference', id: 'msg_1' }] }],
    ['a stored prompt', { prompt: { id: 'pmpt_1' } }],
    ['a background run', { background: true }],
    ['storing the conversation', { store: true }],
    // Content travels in tool outputs and nested tools as it does in the input.
    [
      'an image fetched from a URL in a tool’s output',
      {
        input: [
          {
            type: 'function_call_output',
            call_id: 'c1',
            output: [{ type: 'input_image', image_url: 'https://evil.example/?d=secret' }],
          },
        ],
      },
    ],
    [
      'a file URL in a custom tool’s output',
      {
        input: [
          {
            type: 'custom_tool_call_output',
            call_id: 'c1',
            output: [{ type: 'input_file', file_url: 'https://evil.example/f' }],
          },
        ],
      },
    ],
    [
      'a screenshot fetched from a URL',
      { input: [{ type: 'computer_call_output', call_id: 'c1', output: { image_url: 'https://evil.example/s.png' } }] },
    ],
    [
      'the provider’s tools inside a namespace',
      { tools: [{ type: 'namespace', name: 'ns', tools: [{ type: 'mcp', server_url: 'https://evil.example/mcp' }] }] },
    ],
  ])('refuses %s, forwarding nothing, and says why', async (_what, change) => {
    const before = received.length;
    const res = await post('/v1/responses', { ...codexLike(), ...change });
    expect(res.status).toBe(403);
    expect(res.text).toMatch(/^refused: /);
    expect(received.length).toBe(before);
    expect(refusals.at(-1)).toBe(res.text.replace(/^refused: /, '').trim());
  });

  it('refuses a body of too many objects before parsing it, and forwards nothing', async () => {
    const before = received.length;
    const res = await post('/v1/responses', { ...codexLike(), input: Array.from({ length: 300_000 }, () => ({})) });
    expect(res.status).toBe(403);
    expect(res.text).toMatch(/more than 250000 JSON objects and arrays/);
    expect(received.length).toBe(before);
    // Brackets inside strings are text, not structure.
    const text = await post('/v1/responses', {
      ...codexLike(),
      input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: '{['.repeat(300_000) }] }],
    });
    expect(text.status).toBe(200);
  });

  it('holds no more of the runner’s connections for a jail than its bound, and serves again after', async () => {
    const open = (): Promise<Socket> =>
      new Promise((resolve, reject) => {
        const socket = connect(proxy.socketPath, () => resolve(socket));
        socket.on('error', reject);
      });
    const held: Socket[] = [];
    for (let i = 0; i < MAX_CONNECTIONS; i++) held.push(await open());
    // The next one is closed by the proxy as it comes.
    const extra = await open();
    await new Promise<void>((resolve) => {
      extra.once('close', () => resolve());
      extra.resume();
    });
    for (const socket of held) socket.destroy();
    await expect.poll(async () => (await post('/v1/responses', codexLike())).status, { timeout: 30_000 }).toBe(200);
  });

  it('refuses a body that is not JSON', async () => {
    const res = await new Promise<number>((resolve, reject) => {
      const req = request({ socketPath: proxy.socketPath, path: '/v1/responses', method: 'POST' }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end('not json');
    });
    expect(res).toBe(403);
  });
});

describe('the model proxy, billing', () => {
  // The agent can reach the proxy itself (it is the jail's only way to the model): what it names
  // as the model or the service tier must not be what the operator's key is billed for.
  let fake: FakeModelServer;
  let pinned: ModelProxy;
  let pinDir: string;
  const lines: Record<string, unknown>[] = [];

  const ask = (body: unknown): Promise<{ status: number; text: string }> =>
    new Promise((resolve, reject) => {
      const req = request(
        {
          socketPath: pinned.socketPath,
          path: '/v1/responses',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.end(typeof body === 'string' ? body : JSON.stringify(body));
    });

  beforeAll(async () => {
    fake = await startFakeModel(() => [say('ok')]);
    pinDir = mkdtempSync(join(tmpdir(), 'threadwork-model-pin-'));
    pinned = await startModelProxy(join(pinDir, 'model.sock'), {
      baseUrl: fake.baseUrl,
      apiKey: KEY,
      pin: { model: 'run-model', runId: 'run_pinned_1' },
      logger: createLogger({
        service: 'model-proxy-test',
        destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
      }),
      refused: (r) => refusals.push(r.reason),
    });
  });
  afterAll(async () => {
    await pinned?.close();
    await fake?.close();
    rmSync(pinDir, { recursive: true, force: true });
  });

  it('bills every request as the run’s model at the default tier, whatever the body asks, and logs it with the run', async () => {
    const asked = { ...codexLike(), model: 'the-most-expensive-model', service_tier: 'priority' };
    const res = await ask(asked);
    expect(res.status).toBe(200);
    const got = fake.requests.at(-1)!.body;
    expect(got.model).toBe('run-model');
    expect(got).not.toHaveProperty('service_tier');
    // Nothing else of the request changed.
    const { model: _m, service_tier: _t, ...rest } = asked;
    expect(got).toEqual({ ...rest, model: 'run-model' });
    expect(lines).toContainEqual(
      expect.objectContaining({
        run_id: 'run_pinned_1',
        asked: { model: 'the-most-expensive-model', service_tier: 'priority' },
        model: 'run-model',
      }),
    );
  });

  it('sets the model where the body names none, or names one that is not a string', async () => {
    const { model: _m, ...none } = codexLike();
    expect((await ask(none)).status).toBe(200);
    expect(fake.requests.at(-1)!.body.model).toBe('run-model');
    expect((await ask({ ...codexLike(), model: { name: 'x' }, service_tier: null })).status).toBe(200);
    expect(fake.requests.at(-1)!.body.model).toBe('run-model');
    expect(fake.requests.at(-1)!.body).not.toHaveProperty('service_tier');
  });

  it('follows the pin from turn to turn: a warm harness serves the next run’s model', async () => {
    pinned.pin({ model: 'next-run-model', runId: 'run_pinned_2' });
    expect((await ask({ ...codexLike(), model: 'run-model' })).status).toBe(200);
    expect(fake.requests.at(-1)!.body.model).toBe('next-run-model');
    expect(lines.at(-1)).toMatchObject({ run_id: 'run_pinned_2', model: 'next-run-model' });
  });

  it('forwards what it checked, not the bytes it was sent: a key given twice reaches the model once', async () => {
    pinned.pin({ model: 'test-model', runId: 'run_pinned_4' });
    // JSON.parse keeps the last `model` (the run's, so nothing to rewrite); a parser that keeps the
    // first would have read the expensive one from the bytes as sent.
    const body = JSON.stringify(codexLike()).replace('{', '{"model":"the-most-expensive-model",');
    expect((await ask(body)).status).toBe(200);
    const got = fake.requests.at(-1)!;
    expect(got.text.match(/"model"/g)).toHaveLength(1);
    expect(got.text).not.toContain('the-most-expensive-model');
    expect(got.body).toEqual(codexLike());
  });

  it('forwards a request already billed as the run’s model unchanged, and logs nothing of it', async () => {
    pinned.pin({ model: 'test-model', runId: 'run_pinned_3' });
    const before = lines.length;
    expect((await ask(codexLike())).status).toBe(200);
    expect(fake.requests.at(-1)!.body).toEqual(codexLike());
    expect(lines.length).toBe(before);
  });
});
