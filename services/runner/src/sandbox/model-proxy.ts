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
]);

export interface ModelProxyOptions {
  /** The real endpoint, e.g. `https://api.openai.com/v1`: its path prefix is the only one served. */
  baseUrl: string;
  apiKey: string | null;
  logger: Logger;
  /** Called for every request refused for being off the model API. */
  refused(refusal: { method: string; path: string; reason: string }): void;
}

export interface ModelProxy {
  readonly socketPath: string;
  /** The path prefix the harness must use on its side (that of the real endpoint). */
  readonly basePath: string;
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

  const serve = (req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '/';
    // What the harness needs of the model API, and nothing else of the endpoint's host (with the
    // key added, the rest of the provider's API — files, fine-tuning, the organisation — would be
    // the agent's to call), and no other host.
    if (!allowed(req.method ?? 'GET', path, basePath)) {
      opts.refused({ method: req.method ?? '', path: path.slice(0, 200), reason: 'not a request of the model API' });
      res.writeHead(403, { 'content-type': 'text/plain' }).end('only the model API is reachable from the sandbox\n');
      return;
    }
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !DROPPED.has(name)) headers[name] = value;
    }
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
    req.pipe(out);
  };

  await mkdir(dirname(socketPath), { recursive: true });
  await rm(socketPath, { force: true });
  const server: Server = createServer(serve);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    socketPath,
    basePath,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(socketPath, { force: true });
    },
  };
}
