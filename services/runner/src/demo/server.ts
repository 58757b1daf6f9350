import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { demoReply, type DemoItem } from './script.js';

// The demo model: an OpenAI Responses endpoint (`POST /v1/responses`, streamed as server-sent
// events) on 127.0.0.1, answering with the scripted agent of demo/script.ts. It lives in the runner
// (not in the test kit) because `THREADWORK_DEMO=1` runs it in production code.

export interface DemoModel {
  /** What MODEL_BASE_URL would be: `http://127.0.0.1:PORT/v1`. */
  baseUrl: string;
  close(): Promise<void>;
}

export async function startDemoModel(): Promise<DemoModel> {
  let responses = 0;
  const server = createServer((req, res) => {
    void answer(req, res, () => `resp_demo_${++responses}`).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: err instanceof Error ? err.message : String(err) } }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function answer(req: IncomingMessage, res: ServerResponse, nextId: () => string): Promise<void> {
  if (req.method !== 'POST' || !req.url?.endsWith('/responses')) {
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  writeStream(res, nextId(), demoReply(body));
}

function event(res: ServerResponse, type: string, data: object): void {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

function writeStream(res: ServerResponse, id: string, items: DemoItem[]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  event(res, 'response.created', { response: { id } });
  let outputTokens = 0;
  items.forEach((item, index) => {
    const itemId = `${id}_${index}`;
    if (item.type === 'message') {
      const done = {
        type: 'message',
        id: itemId,
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: item.text, annotations: [] }],
      };
      event(res, 'response.output_item.added', { output_index: index, item: { ...done, content: [] } });
      // Word by word, so a client sees the reply stream in as it would from a real model.
      for (const delta of item.text.match(/\S+\s*/g) ?? []) {
        event(res, 'response.output_text.delta', { item_id: itemId, output_index: index, delta });
      }
      event(res, 'response.output_item.done', { output_index: index, item: done });
      outputTokens += Math.ceil(item.text.length / 4);
    } else {
      const done = {
        type: 'function_call',
        id: itemId,
        call_id: item.call_id,
        name: item.name,
        arguments: JSON.stringify(item.arguments),
        status: 'completed',
      };
      event(res, 'response.output_item.added', { output_index: index, item: done });
      event(res, 'response.output_item.done', { output_index: index, item: done });
      outputTokens += 20;
    }
  });
  event(res, 'response.completed', {
    response: {
      id,
      usage: {
        input_tokens: 0,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: outputTokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: outputTokens,
      },
    },
  });
  res.end();
}
