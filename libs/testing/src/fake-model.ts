import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { endResponseStream, startResponseStream, writeFunctionCall, writeResponseEvent } from '@threadwork/platform';
import { scriptOfPrompt, stepOfTurn } from './fake-script.js';

// A fake OpenAI Responses API (`POST /v1/responses`, streamed as SSE) for driving the real Codex
// CLI offline. It is stateless on purpose: every reply is picked by a script from the request body
// alone (the last user text, the tool outputs so far), because Codex re-sends a request after a
// steer or a retry and a stateful fake would answer the re-sent request with the wrong step.

/** What a script sees of one request. */
export interface FakeModelRequest {
  /** Text of the last user message, harness-injected context (`<environment_context>` …) left out. */
  lastUserText: string;
  /** Every user text of the conversation, oldest first, harness-injected context left out. */
  userTexts: string[];
  /** Every tool result of the conversation, oldest first. */
  toolOutputs: { call_id: string; output: string }[];
  /** Tool results after the last user message: how far the current turn has got. */
  toolOutputsSinceLastUser: { call_id: string; output: string }[];
  /**
   * Codex's per-turn metadata (`client_metadata["x-codex-turn-metadata"]`), which carries what the
   * client passed as `responsesapiClientMetadata` (the runner passes `threadwork_run_id`,
   * `threadwork_attempt`).
   */
  metadata: Record<string, unknown>;
  /** The request body, parsed. */
  body: Record<string, unknown>;
  /** The request body as it arrived. */
  text: string;
  /** The request's Authorization header (the model key as the endpoint received it), or null. */
  authorization: string | null;
}

export type FakeReplyItem =
  { type: 'message'; text: string } | { type: 'function_call'; name: string; arguments: Record<string, unknown> };

/**
 * A list of items, or items streamed and then held for `delayMs` before the response completes
 * (a long model turn, to steer or cancel), or an HTTP error status.
 */
export type FakeReply =
  | readonly FakeReplyItem[]
  | { items: readonly FakeReplyItem[]; delayMs: number }
  | { status: number; message?: string };

export type FakeScript = (req: FakeModelRequest) => FakeReply | Promise<FakeReply>;

export interface FakeModelServer {
  /** OpenAI-compatible base URL, e.g. `http://127.0.0.1:PORT/v1` (what MODEL_BASE_URL takes). */
  baseUrl: string;
  /** Every request body received, oldest first. */
  requests: FakeModelRequest[];
  /** Swaps the script (one server can serve several tests). */
  setScript(script: FakeScript): void;
  close(): Promise<void>;
}

/** Starts the fake on 127.0.0.1 on a random port. */
export async function startFakeModel(script: FakeScript): Promise<FakeModelServer> {
  let current = script;
  const requests: FakeModelRequest[] = [];
  let responses = 0;

  const server: Server = createServer((req, res) => {
    void handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: err instanceof Error ? err.message : String(err) } }));
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST' || !req.url?.endsWith('/responses')) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    const text = await readBody(req);
    const body = JSON.parse(text) as Record<string, unknown>;
    const parsed = { ...parseRequest(body), text, authorization: req.headers.authorization ?? null };
    requests.push(parsed);
    const reply = await current(parsed);
    if ('status' in reply) {
      res
        .writeHead(reply.status, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { message: reply.message ?? `fake model error ${reply.status}` } }));
      return;
    }
    const items = 'items' in reply ? reply.items : reply;
    const delayMs = 'delayMs' in reply ? reply.delayMs : 0;
    responses += 1;
    await streamResponse(res, `resp_${responses}`, items, parsed.toolOutputs.length, delayMs);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
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

// Codex puts its own context (environment, AGENTS.md, permissions) into user-role messages too;
// a script wants what the user typed.
const INJECTED =
  /^\s*<(environment_context|user_instructions|permissions|INSTRUCTIONS|collaboration_mode|turn_aborted)/;

function parseRequest(body: Record<string, unknown>): Omit<FakeModelRequest, 'authorization' | 'text'> {
  const input = Array.isArray(body.input) ? (body.input as Record<string, unknown>[]) : [];
  const userTexts: string[] = [];
  const toolOutputs: { call_id: string; output: string }[] = [];
  let sinceLastUser: { call_id: string; output: string }[] = [];
  for (const item of input) {
    if (item.type === 'message' && item.role === 'user') {
      const text = messageText(item);
      if (text === null || INJECTED.test(text) || text.startsWith('# AGENTS.md')) continue;
      userTexts.push(text);
      sinceLastUser = [];
    } else if (item.type === 'function_call_output') {
      const output = { call_id: String(item.call_id), output: outputText(item.output) };
      toolOutputs.push(output);
      sinceLastUser.push(output);
    }
  }
  return {
    lastUserText: userTexts.at(-1) ?? '',
    userTexts,
    toolOutputs,
    toolOutputsSinceLastUser: sinceLastUser,
    metadata: turnMetadata(body),
    body,
  };
}

function turnMetadata(body: Record<string, unknown>): Record<string, unknown> {
  const meta = body.client_metadata as Record<string, unknown> | undefined;
  const turn = meta?.['x-codex-turn-metadata'];
  if (typeof turn !== 'string') return {};
  try {
    return JSON.parse(turn) as Record<string, unknown>;
  } catch {
    return {};
  }
}

function messageText(item: Record<string, unknown>): string | null {
  const content = item.content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return null;
  const texts = (content as Record<string, unknown>[])
    .filter((c) => typeof c.text === 'string')
    .map((c) => c.text as string);
  return texts.length > 0 ? texts.join('\n') : null;
}

function outputText(output: unknown): string {
  if (typeof output === 'string') return output;
  if (Array.isArray(output)) {
    return (output as Record<string, unknown>[]).map((c) => (typeof c.text === 'string' ? c.text : '')).join('');
  }
  return JSON.stringify(output ?? '');
}

async function streamResponse(
  res: ServerResponse,
  id: string,
  items: readonly FakeReplyItem[],
  callBase: number,
  delayMs: number,
): Promise<void> {
  startResponseStream(res, id, { connection: 'keep-alive' });
  let outputTokens = 0;
  items.forEach((item, index) => {
    const itemId = `${id}_item_${index}`;
    if (item.type === 'message') {
      const done = {
        type: 'message',
        id: itemId,
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: item.text, annotations: [] }],
      };
      writeResponseEvent(res, 'response.output_item.added', {
        output_index: index,
        item: { ...done, status: 'in_progress', content: [] },
      });
      // Two deltas per message, so clients see the text arrive in pieces as with a real model.
      const half = Math.ceil(item.text.length / 2);
      for (const delta of [item.text.slice(0, half), item.text.slice(half)]) {
        if (delta)
          writeResponseEvent(res, 'response.output_text.delta', { item_id: itemId, output_index: index, delta });
      }
      writeResponseEvent(res, 'response.output_item.done', { output_index: index, item: done });
      outputTokens += Math.ceil(item.text.length / 4);
    } else {
      // Call ids follow from the request (tool outputs so far), so a re-sent request gets the same ids.
      const callId = `call_${callBase + index}`;
      writeFunctionCall(res, index, { id: itemId, callId, name: item.name, arguments: item.arguments });
      outputTokens += 10;
    }
  });
  if (delayMs > 0) {
    const closed = new Promise<void>((resolve) => res.once('close', () => resolve()));
    await Promise.race([closed, new Promise<void>((resolve) => setTimeout(resolve, delayMs))]);
    if (res.destroyed || res.writableEnded) return;
  }
  endResponseStream(res, id, { inputTokens: 100, outputTokens });
}

// ---------------------------------------------------------------------------------------------
// Building blocks of scripts

/** The assistant says `text`. */
export function say(text: string): FakeReplyItem {
  return { type: 'message', text };
}

/** Runs `cmd` through Codex's `exec_command` tool (in `workdir`, default the thread's cwd). */
export function shell(cmd: string, workdir?: string): FakeReplyItem {
  return { type: 'function_call', name: 'exec_command', arguments: { cmd, ...(workdir ? { workdir } : {}) } };
}

/** Adds a file with Codex's apply_patch (through exec_command), which Codex reports as a `fileChange`. */
export function addFile(path: string, content: string): FakeReplyItem {
  const lines = content.replace(/\n$/, '').split('\n');
  const patch = ['*** Begin Patch', `*** Add File: ${path}`, ...lines.map((l) => `+${l}`), '*** End Patch'].join('\n');
  return shell(`apply_patch <<'EOF'\n${patch}\nEOF`);
}

export interface FakeQuestion {
  id: string;
  header: string;
  question: string;
  options: { label: string; description: string }[];
}

/** Asks the user through Codex's `request_user_input` tool (offered in plan mode). */
export function askUser(questions: FakeQuestion[]): FakeReplyItem {
  return { type: 'function_call', name: 'request_user_input', arguments: { questions } };
}

/**
 * A script that plays `steps` in order within a turn: step n answers the request that carries n
 * tool results since the last user message. Past the last step it repeats the last one.
 */
export function turnScript(steps: readonly FakeReply[]): FakeScript {
  return (req) => stepOfTurn(steps, req.toolOutputsSinceLastUser.length);
}

/**
 * One script per prompt prefix: the newest user text that starts with a registered prefix picks
 * the script (so a follow-up without a prefix of its own continues its thread's script).
 */
export function scriptsByPrompt(scripts: ReadonlyMap<string, FakeScript>): FakeScript {
  return (req) =>
    scriptOfPrompt(scripts, req.userTexts)?.(req) ?? [say(`no script for ${JSON.stringify(req.lastUserText)}`)];
}
