import { fstatSync } from 'node:fs';
import { Socket } from 'node:net';
import { trace } from '@opentelemetry/api';
import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';
import { currentRequestId } from './request-context.js';

export type { Logger } from 'pino';

/**
 * Paths whose values never reach a log line. Installation tokens, API keys and model keys travel
 * in these fields; pino replaces them before serialising.
 */
export const REDACT_PATHS = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.cookie',
  'token',
  '*.token',
  'apiKey',
  '*.apiKey',
  'api_key',
  '*.api_key',
  'key',
  '*.key',
  'privateKey',
  '*.privateKey',
  'secret',
  '*.secret',
  'password',
  '*.password',
  'env',
  '*.env',
];

export interface LoggerConfig {
  service: string;
  level?: LoggerOptions['level'];
  destination?: DestinationStream;
}

/** Lines kept while nothing reads the log, at most; past it new lines are dropped, not queued. */
export const LOG_BUFFER_BYTES = 4 * 1024 * 1024;

const outputs = new Set<Socket>();

/**
 * Standard output for logs, written without ever blocking the process. Written synchronously (pino's
 * default), a log line to a pipe whose reader stopped reading — a supervisor that is itself stuck or
 * being killed — waits in the kernel for good, and the process cannot even act on SIGTERM. On a pipe
 * or socket, lines here go out through a non-blocking stream: queued up to `LOG_BUFFER_BYTES` while
 * the reader is slow and dropped beyond, and a reader that is gone (EPIPE) ends logging, not the
 * service. Files and terminals, which do not hold writers up, keep pino's synchronous default.
 */
export function stdoutDestination(fd = 1): DestinationStream {
  // One per descriptor for the whole process: every logger created shares it (and its queue).
  let destination = destinations.get(fd);
  if (!destination) {
    destination = openDestination(fd);
    destinations.set(fd, destination);
  }
  return destination;
}

const destinations = new Map<number, DestinationStream>();

function openDestination(fd: number): DestinationStream {
  const stat = fstatSync(fd);
  if (!stat.isFIFO() && !stat.isSocket()) return pino.destination({ dest: fd, sync: true });
  const socket = new Socket({ fd, readable: false, writable: true });
  let broken = false;
  socket.on('error', () => {
    broken = true;
    outputs.delete(socket);
  });
  // Logging alone never keeps a process alive; a write in flight still completes.
  socket.unref();
  outputs.add(socket);
  return {
    write(line: string) {
      if (!broken && socket.writableLength < LOG_BUFFER_BYTES) socket.write(line);
    },
  };
}

/**
 * Waits, at most `timeoutMs`, for queued log lines to reach their reader: called before a process
 * exits on purpose, so a reader that is slow gets the last lines and one that does not read at all
 * does not keep the process alive.
 */
export async function flushLogs(timeoutMs = 1_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const socket of outputs) {
    while (socket.writableLength > 0 && !socket.destroyed && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10).unref());
    }
  }
}

/** Query parameters that carry a credential (OAuth `code`, the install flow's `state`, tokens): never logged. */
const SECRET_QUERY = new Set(['state', 'code', 'token', 'access_token', 'refresh_token', 'client_secret', 'key']);

/** A URL as logged: the values of credential-carrying query parameters replaced. */
export function redactUrl(url: string): string {
  const at = url.indexOf('?');
  if (at < 0) return url;
  const query = url
    .slice(at + 1)
    .split('&')
    .map((pair) => {
      const [name = ''] = pair.split('=', 1);
      let decoded = name;
      try {
        decoded = decodeURIComponent(name);
      } catch {
        // Left as it is: a name that does not decode is not one of ours.
      }
      return SECRET_QUERY.has(decoded.toLowerCase()) ? `${name}=[redacted]` : pair;
    })
    .join('&');
  return `${url.slice(0, at)}?${query}`;
}

/** An HTTP request as logged: method, path with credentials redacted, where it came from. */
function requestSerializer(req: {
  method?: string;
  url?: string;
  id?: unknown;
  ip?: string;
  socket?: { remoteAddress?: string };
}): Record<string, unknown> {
  return {
    method: req.method,
    url: typeof req.url === 'string' ? redactUrl(req.url) : req.url,
    ...(req.id !== undefined ? { id: req.id } : {}),
    remoteAddress: req.ip ?? req.socket?.remoteAddress,
  };
}

/** JSON logger carrying the request's id and the active span's trace_id/span_id on every line. */
export function createLogger({ service, level = 'info', destination }: LoggerConfig): Logger {
  const options: LoggerOptions = {
    level,
    base: { service },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    serializers: { req: requestSerializer },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    mixin() {
      const requestId = currentRequestId();
      const span = trace.getActiveSpan();
      if (!span) return requestId ? { request_id: requestId } : {};
      const ctx = span.spanContext();
      return { ...(requestId ? { request_id: requestId } : {}), trace_id: ctx.traceId, span_id: ctx.spanId };
    },
  };
  return pino(options, destination ?? stdoutDestination());
}
