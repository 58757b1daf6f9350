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
}

export interface ModelProxy {
  readonly socketPath: string;
  /** The path prefix the harness must use on its side (that of the real endpoint). */
  readonly basePath: string;
  close(): Promise<void>;
}

export async function startModelProxy(socketPath: string, opts: ModelProxyOptions): Promise<ModelProxy> {
  const upstream = new URL(opts.baseUrl);
  const basePath = upstream.pathname.replace(/\/+$/, '');
  const send = upstream.protocol === 'https:' ? httpsRequest : httpRequest;

  const serve = (req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '/';
    // The model API's paths only; nothing else of the endpoint's host, and no other host.
    if (!path.startsWith(`${basePath}/`) || path.includes('/../') || path.includes('/./')) {
      opts.logger.warn({ path: path.slice(0, 200), method: req.method }, 'refused a harness request off the model API');
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
