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
import { exceedsContainers } from './model-api/body-size.js';
import { pinBilling, type ModelApi, type ModelDialect, type ModelPin } from './model-api/dialect.js';
import { messagesApi } from './model-api/messages.js';
import { responsesApi } from './model-api/responses.js';

// The model endpoint as a jailed harness reaches it: an HTTP server of the runner's on a unix
// socket bound into the jail (the jail has no network but its own loopback; a bridge inside
// relays a loopback port to the socket). It forwards the model API's paths only, to the real
// endpoint, with the real key added: the key never enters the jail, and the harness cannot use
// the socket to reach anything else. What a harness asks of its model API, what a body may hold and
// what sets its price differ by API: each is a dialect (model-api/).

const DIALECTS: Record<ModelApi, ModelDialect> = { responses: responsesApi, messages: messagesApi };

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

/** Distinct header values removed that one proxy logs (and remembers having logged). */
const MAX_NOTED = 64;

/** Requests of one jail forwarded at once; more wait their turn (a harness asks one at a time). */
const MAX_IN_FLIGHT = 2;

/** Connections one jail may hold open to the proxy; more are closed as they come. */
export const MAX_CONNECTIONS = 64;

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

/** A value the agent wrote, as a log line may carry it: short, and only a string as itself. */
function shown(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  return typeof value === 'string' ? value.slice(0, 100) : `(${typeof value})`;
}

export interface ModelProxyOptions {
  /** The API the harness speaks; Responses when unsaid. */
  api?: ModelApi;
  /**
   * The real endpoint, e.g. `https://api.openai.com/v1` (Responses) or `https://api.anthropic.com`
   * (Messages): its path prefix is the only one served.
   */
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

export async function startModelProxy(socketPath: string, opts: ModelProxyOptions): Promise<ModelProxy> {
  const upstream = new URL(opts.baseUrl);
  const basePath = upstream.pathname.replace(/\/+$/, '');
  const send = upstream.protocol === 'https:' ? httpsRequest : httpRequest;
  let pinned: ModelPin = { ...opts.pin };
  const dialect = DIALECTS[opts.api ?? 'responses'];
  const dropped = new Set([...DROPPED, ...dialect.keyHeaders]);
  // Each header value removed is logged once (a harness sends the same on every request), the
  // first MAX_NOTED only: the values are the agent's to vary.
  const screenedNoted = new Set<string>();

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
    if (!dialect.allowed(req.method ?? 'GET', path, basePath)) {
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
          problem = dialect.bodyProblem(parsed);
        } catch {
          problem = 'the body is not JSON';
        }
      }
      if (problem) {
        opts.refused({ method: req.method, path: path.slice(0, 200), reason: problem });
        res.writeHead(403, { 'content-type': 'text/plain' }).end(`refused: ${problem}\n`);
        return;
      }
      // bodyProblem answered: the body is a JSON object.
      const request = parsed as Record<string, unknown>;
      const billed = pinBilling(request, pinned, dialect.billingFields);
      if (billed) {
        opts.logger.warn(
          {
            run_id: pinned.runId,
            path: path.slice(0, 200),
            asked: Object.fromEntries(dialect.billingFields.map((field) => [field, shown(request[field])])),
            model: pinned.model,
          },
          dialect.billingRewritten,
        );
      }
      // What goes upstream is what was checked, serialised anew: the bytes as sent could say more
      // (a key given twice reads as its last value here, and as its first to some parsers).
      body = Buffer.from(JSON.stringify(billed ?? request), 'utf8');
    }
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !dropped.has(name)) headers[name] = value;
    }
    const screened = (dialect.screenHeaders?.(headers) ?? [])
      .filter((value) => !screenedNoted.has(value))
      .slice(0, MAX_NOTED - screenedNoted.size);
    if (screened.length > 0) {
      for (const value of screened) screenedNoted.add(value);
      opts.logger.warn(
        { run_id: pinned.runId, path: path.slice(0, 200), removed: screened.map(shown) },
        'a sandbox request asked for what its API does beyond the turn; forwarded without it',
      );
    }
    if (body) headers['content-length'] = String(body.length);
    if (opts.apiKey) {
      const [name, value] = dialect.keyHeader(opts.apiKey);
      headers[name] = value;
    }
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
