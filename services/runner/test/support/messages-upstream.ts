import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';

// The Messages API's side of the model proxy's tests: a provider that records what reaches it and
// streams an answer as Anthropic's does, a request as Claude Code makes it, and a client of the
// proxy's socket.

/** The betas Claude Code 2.1.328 sends on every turn, as measured. */
export const CLAUDE_CODE_BETAS =
  'claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,mid-conversation-tool-changes-2026-07-01,thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20,effort-2025-11-24,thinking-display-updates-2026-08-18';

/** A streamed answer as the Messages API sends it, in events the upstream writes one at a time. */
export const SSE_EVENTS = [
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"run-model","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}\n\n',
  'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
  'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}\n\n',
  'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
  'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}\n\n',
  'event: message_stop\ndata: {"type":"message_stop"}\n\n',
];

/** A request as Claude Code makes it: its own tools (no type), inline content, a tool's result. */
export const claudeLike = () => ({
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

export interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A stand-in for the provider on a loopback port: a turn asked with `stream` gets SSE_EVENTS. */
export async function startMessagesUpstream(): Promise<{ server: Server; baseUrl: string; received: Received[] }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { server, baseUrl: `http://127.0.0.1:${port}`, received };
}

/** One request to the proxy's socket, as a jailed harness sends it. */
export function callProxy(
  socketPath: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        socketPath,
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
