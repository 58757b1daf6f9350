import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { endResponseStream, startResponseStream, writeFunctionCall, writeResponseEvent } from '@threadwork/platform';
import { demoReply, type DemoItem } from './script.js';

// The demo model: an OpenAI Responses endpoint (`POST /v1/responses`, streamed as server-sent
// events) on 127.0.0.1, answering with the scripted agent of demo/script.ts. It lives in the runner
// (not in the test kit) because `THREADWORK_DEMO=1` runs it in production code.

export interface DemoModel {
  /** What MODEL_BASE_URL would be: `http://127.0.0.1:PORT/v1`. */
  baseUrl: string;
  /** What CLAUDE_BASE_URL would be: `http://127.0.0.1:PORT`. */
  messagesUrl: string;
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
    messagesUrl: `http://127.0.0.1:${port}`,
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

function writeStream(res: ServerResponse, id: string, items: DemoItem[]): void {
  startResponseStream(res, id);
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
      writeResponseEvent(res, 'response.output_item.added', { output_index: index, item: { ...done, content: [] } });
      // Word by word, so a client sees the reply stream in as it would from a real model.
      for (const delta of item.text.match(/\S+\s*/g) ?? []) {
        writeResponseEvent(res, 'response.output_text.delta', { item_id: itemId, output_index: index, delta });
      }
      writeResponseEvent(res, 'response.output_item.done', { output_index: index, item: done });
      outputTokens += Math.ceil(item.text.length / 4);
    } else {
      writeFunctionCall(res, index, { id: itemId, callId: item.call_id, name: item.name, arguments: item.arguments });
      outputTokens += 20;
    }
  });
  endResponseStream(res, id, { inputTokens: 0, outputTokens });
}
