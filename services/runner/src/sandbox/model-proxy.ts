import { mkdir, rm } from 'node:fs/promises';
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import { dirname } from 'node:path';
import type { Logger } from '@threadwork/platform';

// The model endpoint as a jailed harness reaches it: an HTTP server of the runner's on a unix
// socket bound into the jail (the jail has no network but its own loopback; a bridge inside
// relays a loopback port to the socket). It forwards the model API's paths only, to the real
// endpoint, with the real key added: the key never enters the jail, and the harness cannot use
// the socket to reach anything else.

/** Headers that describe one hop, or carry what only the proxy may send. */
const DROPPED = new Set([
  'authorization',
  'proxy-authorization',
  'cookie',
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'proxy-connection',
  'te',
  'trailer',
  // Which of the key's organisations and projects is billed is the operator's to say, not the agent's.
  'openai-organization',
  'openai-project',
  'content-length',
]);

/** How large a request body the proxy reads (a long conversation with inline images is large). */
const MAX_BODY_BYTES = 32 * 2 ** 20;

/**
 * How many JSON objects and arrays a body may hold. Parsing is the runner's work on its one event
 * loop, and its cost follows the number of values, not the bytes: a body of millions of `{}` would
 * hold every sandbox's run still for minutes. A long conversation holds tens of thousands.
 */
export const MAX_BODY_CONTAINERS = 250_000;

/** Requests of one jail forwarded at once; more wait their turn (a harness asks one at a time). */
const MAX_IN_FLIGHT = 2;

/** Connections one jail may hold open to the proxy; more are closed as they come. */
export const MAX_CONNECTIONS = 64;

/** Tools a harness declares: its own, run in the jail. The provider's (web search, MCP servers, file search, code interpreter) reach places of the agent's choosing on the key's account. */
const HARNESS_TOOLS = new Set(['function', 'custom', 'namespace', 'local_shell']);

/** Types of content or items that make the provider read the account's storage, or fetch a URL. */
const REFUSED_TYPES: Record<string, string> = {
  item_reference: 'item_reference reads what the account stores',
  input_file: 'input_file reads a file of the account or a URL',
};

/** Fields that name something the provider fetches or reads on the account, wherever they appear. */
const REFUSED_FIELDS: Record<string, string> = {
  file_id: 'file_id reads a file of the account',
  file_url: 'file_url makes the provider fetch a URL',
  server_url: 'server_url makes the provider call a server',
  vector_store_ids: 'vector_store_ids reads what the account stores',
};

/**
 * Why a Responses request is not one a harness makes, or null. With the key added, the request's
 * body is the agent's to write: it must not make the provider fetch a URL (an image, a file, an MCP
 * server: a way out past the egress policy), read what the key's account stores (files, stored
 * responses, prompts, conversations), or run on past the turn (background). The input is checked
 * throughout (a tool's output carries content as a message does), and so are the tools a namespace
 * nests.
 */
export function responsesRequestProblem(body: unknown): string | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'the body is not a JSON object';
  const request = body as Record<string, unknown>;
  for (const field of ['previous_response_id', 'conversation', 'prompt']) {
    if (request[field] !== undefined && request[field] !== null) return `${field} reads what the account stores`;
  }
  if (request.background === true) return 'background runs outlive the turn';
  if (request.store === true) return 'store keeps the conversation on the account';
  if (request.tools !== undefined) {
    if (!Array.isArray(request.tools)) return 'tools is not a list';
    const problem = toolsProblem(request.tools);
    if (problem) return problem;
  }
  return valueProblem(request.input);
}

/** The tools declared, and those nested in a namespace; not their parameters, which are JSON Schemas. */
function toolsProblem(tools: unknown[]): string | null {
  for (const tool of tools as { type?: unknown; tools?: unknown }[]) {
    if (!HARNESS_TOOLS.has(String(tool?.type))) return `tool type ${JSON.stringify(tool?.type)} is the provider's`;
    if (tool.tools !== undefined) {
      if (!Array.isArray(tool.tools)) return 'tools is not a list';
      const problem = toolsProblem(tool.tools);
      if (problem) return problem;
    }
  }
  return null;
}

function valueProblem(value: unknown): string | null {
  if (Array.isArray(value)) {
    for (const item of value) {
      const problem = valueProblem(item);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const node = value as Record<string, unknown>;
  if (typeof node.type === 'string' && REFUSED_TYPES[node.type]) return REFUSED_TYPES[node.type]!;
  for (const [key, child] of Object.entries(node)) {
    if (child === undefined || child === null) continue;
    if (REFUSED_FIELDS[key]) return REFUSED_FIELDS[key]!;
    if (key === 'image_url') {
      const url = typeof child === 'string' ? child : (child as { url?: unknown }).url;
      if (typeof url !== 'string' || !url.startsWith('data:'))
        return 'images must be inline (a data: URL), not fetched';
      continue;
    }
    const problem = valueProblem(child);
    if (problem) return problem;
  }
  return null;
}

/**
 * Whether a JSON text holds more than `max` objects and arrays, counted by one pass over its bytes
 * (brackets inside strings are not counted), before anything is parsed.
 */
export function exceedsContainers(text: Buffer, max: number): boolean {
  let count = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const byte = text[i];
    if (inString) {
      if (byte === 0x5c) i++;
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) {
      inString = true;
    } else if ((byte === 0x7b || byte === 0x5b) && ++count > max) {
      return true;
    }
  }
  return false;
}

function readBody(req: IncomingMessage): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        resolve(null);
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * What every request body forwarded is billed as: the run's model, and which run it is (for the log).
 * Set per turn: a harness kept warm for a thread's next run serves that run's model then.
 */
export interface ModelPin {
  model: string;
  runId?: string | undefined;
}

/**
 * The body as it is billed: `model` set to the pinned one and `service_tier` removed (the account's
 * default tier: `priority` bills more per token, and `flex` or `scale` are the operator's to
 * choose); null when it already is. These set the price of each token on the key's account; how
 * many tokens a turn takes is the harness's loop's. Rewritten rather than refused: the harness
 * names the run's model on its own requests (turns and compactions alike), so a difference is
 * normally the agent's, and rewriting bills it as configured; a refusal would also fail a harness
 * that names another model for a request of its own, where a rewrite keeps it working.
 */
export function pinBilling(request: Record<string, unknown>, pin: ModelPin): Record<string, unknown> | null {
  if (request.model === pin.model && !('service_tier' in request)) return null;
  const { service_tier: _tier, ...rest } = request;
  return { ...rest, model: pin.model };
}

/** A value the agent wrote, as a log line may carry it: short, and only a string as itself. */
function shown(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  return typeof value === 'string' ? value.slice(0, 100) : `(${typeof value})`;
}

export interface ModelProxyOptions {
  /** The real endpoint, e.g. `https://api.openai.com/v1`: its path prefix is the only one served. */
  baseUrl: string;
  apiKey: string | null;
  /** The model every request is billed as, until `pin` sets another (pinBilling). */
  pin: ModelPin;
  logger: Logger;
  /** Called for every request refused for being off the model API. */
  refused(refusal: { method: string; path: string; reason: string }): void;
}

export interface ModelProxy {
  readonly socketPath: string;
  /** The path prefix the harness must use on its side (that of the real endpoint). */
  readonly basePath: string;
  /** Bills the requests from now on as `pin` says: the model of the turn about to run. */
  pin(pin: ModelPin): void;
  close(): Promise<void>;
}

/** The requests a harness makes of a Responses API: a turn, its compaction, the model list. */
const ALLOWED: readonly { method: string; path: RegExp }[] = [
  { method: 'POST', path: /^\/responses(\/compact)?$/ },
  { method: 'GET', path: /^\/models(\/[A-Za-z0-9._:-]+)?$/ },
];

function allowed(method: string, url: string, basePath: string): boolean {
  const [pathname = ''] = url.split('?');
  // No encoded or dot segments that the endpoint could resolve to somewhere else.
  if (!pathname.startsWith(`${basePath}/`) || /%|\/\.\.?(\/|$)/.test(pathname)) return false;
  const rest = pathname.slice(basePath.length);
  return ALLOWED.some((rule) => rule.method === method && rule.path.test(rest));
}

export async function startModelProxy(socketPath: string, opts: ModelProxyOptions): Promise<ModelProxy> {
  const upstream = new URL(opts.baseUrl);
  const basePath = upstream.pathname.replace(/\/+$/, '');
  const send = upstream.protocol === 'https:' ? httpsRequest : httpRequest;
  let pinned: ModelPin = { ...opts.pin };

  // A jail's requests beyond MAX_IN_FLIGHT wait here for one to finish.
  let inFlight = 0;
  const waiting: (() => void)[] = [];
  const slot = async (): Promise<() => void> => {
    if (inFlight >= MAX_IN_FLIGHT) await new Promise<void>((resolve) => waiting.push(resolve));
    inFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      inFlight--;
      waiting.shift()?.();
    };
  };

  const serve = async (req: IncomingMessage, res: ServerResponse) => {
    const release = await slot();
    res.once('close', release);
    await forward(req, res);
  };

  const forward = async (req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '/';
    // What the harness needs of the model API, and nothing else of the endpoint's host (with the
    // key added, the rest of the provider's API — files, fine-tuning, the organisation — would be
    // the agent's to call), and no other host.
    if (!allowed(req.method ?? 'GET', path, basePath)) {
      opts.refused({ method: req.method ?? '', path: path.slice(0, 200), reason: 'not a request of the model API' });
      res.writeHead(403, { 'content-type': 'text/plain' }).end('only the model API is reachable from the sandbox\n');
      return;
    }
    let body: Buffer | null = null;
    if (req.method === 'POST') {
      body = await readBody(req).catch(() => null);
      if (!body) {
        res.writeHead(413, { 'content-type': 'text/plain' }).end('the request is too large\n');
        return;
      }
      let problem: string | null;
      let parsed: unknown = null;
      if (exceedsContainers(body, MAX_BODY_CONTAINERS)) {
        problem = `the body holds more than ${MAX_BODY_CONTAINERS} JSON objects and arrays`;
      } else {
        try {
          parsed = JSON.parse(body.toString('utf8'));
          problem = responsesRequestProblem(parsed);
        } catch {
          problem = 'the body is not JSON';
        }
      }
      if (problem) {
        opts.refused({ method: req.method, path: path.slice(0, 200), reason: problem });
        res.writeHead(403, { 'content-type': 'text/plain' }).end(`refused: ${problem}\n`);
        return;
      }
      // responsesRequestProblem answered: the body is a JSON object.
      const request = parsed as Record<string, unknown>;
      const billed = pinBilling(request, pinned);
      if (billed) {
        opts.logger.warn(
          {
            run_id: pinned.runId,
            path: path.slice(0, 200),
            asked: { model: shown(request.model), service_tier: shown(request.service_tier) },
            model: pinned.model,
          },
          'a sandbox request asked for another model or service tier; forwarded as the run’s model, default tier',
        );
      }
      // What goes upstream is what was checked, serialised anew: the bytes as sent could say more
      // (a key given twice reads as its last value here, and as its first to some parsers).
      body = Buffer.from(JSON.stringify(billed ?? request), 'utf8');
    }
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !DROPPED.has(name)) headers[name] = value;
    }
    if (body) headers['content-length'] = String(body.length);
    if (opts.apiKey) headers.authorization = `Bearer ${opts.apiKey}`;
    const out = send(
      {
        protocol: upstream.protocol,
        hostname: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path,
        headers,
      },
      (answer) => {
        const back: Record<string, string | string[]> = {};
        for (const [name, value] of Object.entries(answer.headers)) {
          if (value !== undefined && !DROPPED.has(name) && name !== 'set-cookie') back[name] = value;
        }
        res.writeHead(answer.statusCode ?? 502, back);
        answer.pipe(res);
      },
    );
    out.on('error', (err) => {
      opts.logger.warn(
        { err: { message: err.message } },
        'the model endpoint could not be reached for a jailed harness',
      );
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end();
    });
    out.end(body ?? undefined);
  };

  await mkdir(dirname(socketPath), { recursive: true });
  await rm(socketPath, { force: true });
  const server: Server = createServer((req, res) => {
    serve(req, res).catch((err: unknown) => {
      opts.logger.warn({ err: { message: (err as Error).message } }, 'a jailed harness’s model request failed');
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end();
    });
  });
  // A jail cannot hold the runner's file descriptors: past this, new connections are closed.
  server.maxConnections = MAX_CONNECTIONS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    socketPath,
    basePath,
    pin(next) {
      pinned = { ...next };
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(socketPath, { force: true });
    },
  };
}
