import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  endMessageStream,
  messageErrorBody,
  startMessageStream,
  writeMessageBlock,
  type MessageBlock,
} from '@threadwork/platform';
import { parseMessagesRequest, type FakeMessagesRequest } from './fake-messages-request.js';

export type { FakeMessagesRequest, FakeToolResult } from './fake-messages-request.js';

// A fake Anthropic Messages API (`POST /v1/messages`, streamed as SSE) for driving the real Claude
// Code CLI offline. Stateless like the fake Responses API beside it (`fake-model.ts`), for the same
// reason: the CLI re-sends a request after a retry or a steer, and every answer is picked by a
// script from the request alone.

/** A block of a scripted answer; a tool call gets its id from the fake. */
export type FakeMessagesBlock =
  { type: 'text'; text: string } | { type: 'tool_use'; name: string; input: Record<string, unknown> };

/**
 * A list of blocks, or blocks streamed and then held for `delayMs` before the answer completes (a
 * long model turn, to steer or cancel), or an HTTP error status with the API's error body.
 */
export type FakeMessagesReply =
  | readonly FakeMessagesBlock[]
  | { blocks: readonly FakeMessagesBlock[]; delayMs: number }
  | { status: number; message?: string; errorType?: string };

export type FakeMessagesScript = (req: FakeMessagesRequest) => FakeMessagesReply | Promise<FakeMessagesReply>;

export interface FakeMessagesServer {
  /** What ANTHROPIC_BASE_URL takes, e.g. `http://127.0.0.1:PORT` (the client adds `/v1/messages`). */
  baseUrl: string;
  /** Every request received, oldest first. */
  requests: FakeMessagesRequest[];
  /** Swaps the script (one server can serve several tests). */
  setScript(script: FakeMessagesScript): void;
  close(): Promise<void>;
}

/** Starts the fake on 127.0.0.1 on a random port. */
export async function startFakeMessages(script: FakeMessagesScript): Promise<FakeMessagesServer> {
  let current = script;
  const requests: FakeMessagesRequest[] = [];
  let answers = 0;

  const server: Server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(messageErrorBody(500, err instanceof Error ? err.message : String(err)));
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? '/', 'http://fake').pathname;
    if (req.method !== 'POST' || path !== '/v1/messages') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(messageErrorBody(404, `no route ${path}`));
      return;
    }
    const parsed = parseMessagesRequest(await readBody(req), req.headers);
    requests.push(parsed);
    const reply = await current(parsed);
    answers += 1;
    const requestId = `req_fake_${answers}`;
    if ('status' in reply) {
      res
        .writeHead(reply.status, { 'content-type': 'application/json', 'request-id': requestId })
        .end(messageErrorBody(reply.status, reply.message ?? `fake model error ${reply.status}`, reply.errorType));
      return;
    }
    const blocks = 'blocks' in reply ? reply.blocks : reply;
    const delayMs = 'delayMs' in reply ? reply.delayMs : 0;
    await streamAnswer(
      res,
      { id: `msg_fake_${answers}`, requestId, model: parsed.model },
      withIds(parsed, blocks),
      delayMs,
    );
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}`,
    requests,
    setScript(next) {
      current = next;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

// Tool use ids follow from the conversation sent, so a re-sent request gets the same ids while
// two conversations (or two turns of one) never share one.
function withIds(req: FakeMessagesRequest, blocks: readonly FakeMessagesBlock[]): MessageBlock[] {
  const messages = JSON.stringify(req.body.messages ?? []);
  const conversation = createHash('sha256').update(messages).digest('hex').slice(0, 16);
  return blocks.map((block, index) =>
    block.type === 'text' ? block : { ...block, id: `toolu_${conversation}_${index}` },
  );
}

async function streamAnswer(
  res: ServerResponse,
  answer: { id: string; requestId: string; model: string },
  blocks: readonly MessageBlock[],
  delayMs: number,
): Promise<void> {
  startMessageStream(res, { id: answer.id, model: answer.model, inputTokens: 100 }, { 'request-id': answer.requestId });
  let outputTokens = 0;
  blocks.forEach((block, index) => {
    writeMessageBlock(res, index, block);
    outputTokens += block.type === 'text' ? Math.ceil(block.text.length / 4) : 10;
  });
  if (delayMs > 0) {
    const closed = new Promise<void>((resolve) => res.once('close', () => resolve()));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, delayMs)))]);
    clearTimeout(timer);
    if (res.destroyed || res.writableEnded) return;
  }
  const stopReason = blocks.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
  endMessageStream(res, { stopReason, outputTokens: Math.max(outputTokens, 1) });
}
