import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigError } from './config.js';
import { flushLogs, type Logger } from './logger.js';

type StopFn = () => Promise<void> | void;

/**
 * Things a service started, stopped in reverse order: the last thing started (say, the endpoint
 * that takes requests) is the first to stop, and the connections it used close after it.
 */
export class Lifecycle {
  private readonly stops: { name: string; stop: StopFn }[] = [];

  constructor(private readonly logger: Logger) {}

  add(name: string, stop: StopFn): void {
    this.stops.push({ name, stop });
  }

  async stop(): Promise<void> {
    while (this.stops.length > 0) {
      const { name, stop } = this.stops.pop()!;
      try {
        await stop();
      } catch (err) {
        this.logger.warn({ err, component: name }, 'error while stopping');
      }
    }
  }
}

export interface RunningService {
  stop(): Promise<void>;
}

/**
 * Keeps a started service running until SIGTERM or SIGINT, then stops it within `timeoutMs`
 * (in-flight requests finish, NATS subscriptions drain) and exits. A second signal exits at once.
 */
export function stopOnSignal(service: RunningService, logger: Logger, timeoutMs: number): void {
  let stopping = false;
  // The last lines get a moment to reach a reader that is slow, none at all to wait for one that is stuck.
  const exit = (code: number) => void flushLogs().then(() => process.exit(code));
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal, exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'stopping');
    const deadline = setTimeout(() => {
      logger.error({ timeoutMs }, 'shutdown deadline passed, exiting');
      exit(1);
    }, timeoutMs + 1_000);
    deadline.unref();
    service.stop().then(
      () => {
        logger.info('stopped');
        exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'failed to stop cleanly');
        exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** Entry-file failure handler: one clear line for a bad configuration, a full report otherwise. */
export function fatal(err: unknown): never {
  if (err instanceof ConfigError) {
    process.stderr.write(`${err.message}\n`);
  } else {
    process.stderr.write(`fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  }
  process.exit(1);
}

export interface HealthServer {
  port: number;
  close(): Promise<void>;
}

/**
 * `/healthz` (the process is alive) and `/readyz` (its dependencies answer) for probes of services
 * without an HTTP API of their own. A check that does not finish within `readyTimeoutMs` (a NATS
 * flush waits for the server to come back) answers not ready rather than leaving the probe hanging.
 */
export async function startHealthServer(
  port: number,
  ready: () => Promise<boolean>,
  readyTimeoutMs = 3_000,
): Promise<HealthServer> {
  const check = () =>
    new Promise<boolean>((resolve, reject) => {
      const timer = setTimeout(() => resolve(false), readyTimeoutMs);
      ready().then(
        (ok) => {
          clearTimeout(timer);
          resolve(ok);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  const server: Server = createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
      return;
    }
    if (req.url === '/readyz') {
      check().then(
        (ok) =>
          res
            .writeHead(ok ? 200 : 503, { 'content-type': 'application/json' })
            .end(JSON.stringify({ status: ok ? 'ready' : 'not_ready' })),
        () => res.writeHead(503, { 'content-type': 'application/json' }).end('{"status":"not_ready"}'),
      );
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '0.0.0.0', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
