import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  callProxy,
  CLAUDE_CODE_BETAS,
  claudeLike,
  SSE_EVENTS,
  startMessagesUpstream,
  type Received,
} from '../../test/support/messages-upstream.js';
import { startModelProxy, type ModelProxy } from './model-proxy.js';

// The model endpoint as a jailed Claude Code reaches it: Anthropic's Messages API, with the key
// added outside as `x-api-key`, and nothing of the API beyond a turn, a token count and the model
// list, no betas that switch on the provider's files, servers or tools, and every request billed as
// the run's model whatever the agent writes.

const KEY = 'sk-ant-proxy-test';
let upstream: Server;
let baseUrl: string;
let received: Received[];
let proxy: ModelProxy;
let dir: string;
const refusals: string[] = [];
const lines: Record<string, unknown>[] = [];

const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  callProxy(proxy.socketPath, method, path, body, headers);
const post = (path: string, body: unknown, headers?: Record<string, string>) => call('POST', path, body, headers);

beforeAll(async () => {
  ({ server: upstream, baseUrl, received } = await startMessagesUpstream());
  dir = mkdtempSync(join(tmpdir(), 'threadwork-model-proxy-messages-'));
  proxy = await startModelProxy(join(dir, 'model.sock'), {
    api: 'messages',
    baseUrl,
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

describe('the model proxy, Messages API, without a key', () => {
  // An endpoint that takes no key (a local model server): the agent's own key still goes nowhere.
  let keyless: ModelProxy;
  let keylessDir: string;
  beforeAll(async () => {
    keylessDir = mkdtempSync(join(tmpdir(), 'threadwork-model-proxy-keyless-'));
    keyless = await startModelProxy(join(keylessDir, 'model.sock'), {
      api: 'messages',
      baseUrl,
      apiKey: null,
      pin: { model: 'run-model' },
      logger: createLogger({ service: 'model-proxy-test', level: 'silent' }),
      refused: (r) => refusals.push(r.reason),
    });
  });
  afterAll(async () => {
    await keyless?.close();
    rmSync(keylessDir, { recursive: true, force: true });
  });

  it('forwards no x-api-key or authorization the agent sends', async () => {
    const { status } = await callProxy(
      keyless.socketPath,
      'POST',
      '/v1/messages',
      { ...claudeLike(), stream: false },
      { 'x-api-key': 'sk-ant-agents-own', authorization: 'Bearer sk-ant-agents-own' },
    );
    expect(status).toBe(200);
    expect(received.at(-1)!.headers).not.toHaveProperty('x-api-key');
    expect(received.at(-1)!.headers).not.toHaveProperty('authorization');
  });
});
