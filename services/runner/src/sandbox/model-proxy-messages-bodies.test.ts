import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callProxy, claudeLike, startMessagesUpstream, type Received } from '../../test/support/messages-upstream.js';
import { startModelProxy, type ModelProxy } from './model-proxy.js';

// What the body of a Messages request may hold through the jail's model proxy: what a harness that
// runs its own tools sends, nothing that makes the provider call a server, run code, use its own
// tools, fetch a URL or read the account's files (model-api/messages.ts).

const KEY = 'sk-ant-proxy-test';
let upstream: Server;
let received: Received[];
let proxy: ModelProxy;
let dir: string;
const refusals: string[] = [];

const post = (path: string, body: unknown) => callProxy(proxy.socketPath, 'POST', path, body);

beforeAll(async () => {
  let baseUrl: string;
  ({ server: upstream, baseUrl, received } = await startMessagesUpstream());
  dir = mkdtempSync(join(tmpdir(), 'threadwork-model-proxy-messages-'));
  proxy = await startModelProxy(join(dir, 'model.sock'), {
    api: 'messages',
    baseUrl,
    apiKey: KEY,
    pin: { model: 'run-model', runId: 'run_messages_1' },
    logger: createLogger({ service: 'model-proxy-test', level: 'silent' }),
    refused: (r) => refusals.push(r.reason),
  });
});
afterAll(async () => {
  await proxy?.close();
  await new Promise((resolve) => upstream?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

describe('the model proxy, Messages API, bodies', () => {
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

  it('refuses a file of the account by the source’s type, and by a file_id wherever it is', async () => {
    const source = await post('/v1/messages', {
      ...claudeLike(),
      ...withContent({ type: 'image', source: { type: 'file' } }),
    });
    expect(source.text).toBe('refused: a source of type file reads a file of the account\n');
    const fileId = await post('/v1/messages', {
      ...claudeLike(),
      ...withContent({ type: 'document', file_id: 'file_1' }),
    });
    expect(fileId.text).toBe('refused: file_id reads a file of the account\n');
  });
});
