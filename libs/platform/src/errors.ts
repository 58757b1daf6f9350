import type { ErrorCode } from '@threadwork/contracts';
import { isTransientFailure } from './transient.js';

/**
 * The one error type that crosses service boundaries. `code` is stable and part of the public
 * contract; `retryable` tells a caller (or a JetStream consumer) whether trying again can help.
 */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly retryable: boolean;
  readonly details: Record<string, unknown> | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    opts: { cause?: unknown; retryable?: boolean; details?: Record<string, unknown> } = {},
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.code = code;
    this.retryable = opts.retryable ?? (code === 'unavailable' || code === 'rate_limited');
    this.details = opts.details;
  }

  toJSON(): SerializedAppError {
    return {
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      ...(this.details ? { details: this.details } : {}),
    };
  }

  static fromJSON(e: SerializedAppError): AppError {
    return new AppError(e.code, e.message, { retryable: e.retryable, details: e.details });
  }
}

export interface SerializedAppError {
  code: ErrorCode;
  message: string;
  retryable: boolean;
  details?: Record<string, unknown> | undefined;
}

export const notFound = (what: string) => new AppError('not_found', `${what} not found`);
export const invalidRequest = (message: string, details?: Record<string, unknown>) =>
  new AppError('invalid_request', message, { details });
export const conflict = (
  code: Extract<
    ErrorCode,
    'thread_busy' | 'no_active_run' | 'already_settled' | 'idempotency_conflict' | 'too_many_runs' | 'too_many_api_keys'
  >,
  message: string,
) => new AppError(code, message);
export const unavailable = (message: string, cause?: unknown) => new AppError('unavailable', message, { cause });
/** 429 with `Retry-After: retryAfterSeconds` at the HTTP edge. */
export const rateLimited = (message: string, retryAfterSeconds: number) =>
  new AppError('rate_limited', message, { details: { retry_after_seconds: retryAfterSeconds } });

/** How long a `rate_limited` error asks the caller to wait, in whole seconds (at least 1). */
export function retryAfterSeconds(err: AppError): number {
  const value = err.details?.['retry_after_seconds'];
  return typeof value === 'number' && Number.isFinite(value) ? Math.max(1, Math.ceil(value)) : 1;
}

/** How long an error says to wait before trying again (`details.retry_after_ms`); null when it does not. */
export function retryAfterMs(err: unknown): number | null {
  const ms = isAppError(err) ? err.details?.['retry_after_ms'] : undefined;
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0 ? ms : null;
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}

/**
 * The AppError a failure is reported as. A backing server that did not answer (a database or NATS
 * timeout, no responder, a closed connection) is `unavailable`, retryable; anything else that is
 * not an AppError is an internal failure, whose message is not for clients.
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  if (isTransientFailure(err)) return unavailable('a backing service did not answer; retry', err);
  return new AppError('internal', 'internal error', { cause: err, retryable: false });
}

export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
