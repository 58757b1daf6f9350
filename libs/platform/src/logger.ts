import { trace } from '@opentelemetry/api';
import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';

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

/** JSON logger carrying the active span's trace_id/span_id on every line. */
export function createLogger({ service, level = 'info', destination }: LoggerConfig): Logger {
  const options: LoggerOptions = {
    level,
    base: { service },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
    mixin() {
      const span = trace.getActiveSpan();
      if (!span) return {};
      const ctx = span.spanContext();
      return { trace_id: ctx.traceId, span_id: ctx.spanId };
    },
  };
  return destination ? pino(options, destination) : pino(options);
}
