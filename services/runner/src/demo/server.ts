import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  endMessageStream,
  endResponseStream,
  messageErrorBody,
  messageStartEvent,
  startMessageStream,
  startResponseStream,
  writeFunctionCall,
  writeMessageBlock,
  writeResponseEvent,
  type MessageBlock,
} from '@threadwork/platform';
import { messagesReply } from './messages.js';
import { responsesReply, type DemoItem } from './responses.js';
import { DemoRuns } from './sessions.js';

// The demo model on 127.0.0.1, answering with the scripted agent of demo/script.ts in two
// protocols: the OpenAI Responses API (`POST /v1/responses`, for Codex) and the Anthropic Messages
// API (`POST /v1/messages`, for Claude Code), both streamed as server-sent events. It lives in the
// runner (not in the test kit) because `THREADWORK_DEMO=1` runs it in production code.

export interface DemoModel {
  /** What MODEL_BASE_URL would be: `http://127.0.0.1:PORT/v1`. */
  baseUrl: string;
  /** What CLAUDE_BASE_URL would be: `http://127.0.0.1:PORT`. */
  messagesUrl: string;
  /** Tells the model which run a Claude Code session's turn is (ClaudeHarnessOptions.onTurn). */
  onTurn(sessionId: string, runId: string | null): void;
  close(): Promise<void>;
}

export async function startDemoModel(): Promise<DemoModel> {
  let answers = 0;
  const runs = new DemoRuns();
  const server = createServer((req, res) => {
    const id = ++answers;
    void answer(req, res, id, runs).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(messageErrorBody(500, err instanceof Error ? err.message : String(err)));
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
    onTurn: runs.onTurn,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function answer(req: IncomingMessage, res: ServerResponse, n: number, runs: DemoRuns): Promise<void> {
  const path = new URL(req.url ?? '/', 'http://demo').pathname;
  if (req.method === 'POST' && path.endsWith('/responses')) {
    writeResponses(res, `resp_demo_${n}`, responsesReply(await readJson(req)));
    return;
  }
  if (req.method === 'POST' && path === '/v1/messages') {
    const body = await readJson(req);
    const session = req.headers['x-claude-code-session-id'];
    const blocks = messagesReply(body, { runId: runs.runOf(typeof session === 'string' ? session : null) });
    const model = typeof body.model === 'string' ? body.model : 'demo-scripted';
    writeMessage(res, { id: `msg_demo_${n}`, model, stream: body.stream === true }, blocks);
    return;
  }
  res.writeHead(404, { 'content-type': 'application/json' }).end(messageErrorBody(404, `no route ${path}`));
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
}

function writeResponses(res: ServerResponse, id: string, items: DemoItem[]): void {
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

/**
 * A Messages answer, streamed; or, for a request that does not ask for a stream (Claude Code's
 * model check), as one JSON Message.
 */
function writeMessage(
  res: ServerResponse,
  message: { id: string; model: string; stream: boolean },
  blocks: MessageBlock[],
): void {
  const stopReason = blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
  const outputTokens = blocks.reduce((sum, b) => sum + (b.type === 'text' ? Math.ceil(b.text.length / 4) : 20), 0);
  const envelope = { id: message.id, model: message.model, inputTokens: 0 };
  if (!message.stream) {
    const start = messageStartEvent(envelope).message;
    const content = blocks.map((b) =>
      b.type === 'text' ? { ...b, citations: null } : { ...b, caller: { type: 'direct' as const } },
    );
    const whole = {
      ...start,
      content,
      stop_reason: stopReason,
      usage: { ...start.usage, output_tokens: outputTokens },
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(whole));
    return;
  }
  startMessageStream(res, envelope);
  blocks.forEach((block, index) => writeMessageBlock(res, index, block));
  endMessageStream(res, { stopReason, outputTokens });
}
