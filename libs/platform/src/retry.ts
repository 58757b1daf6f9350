import { setTimeout as sleep } from 'node:timers/promises';
import { isAppError, retryAfterMs } from './errors.js';

// Trying again after a failure that may pass (a service restarting, NATS reconnecting): the delay
// doubles from `minDelayMs` up to `maxDelayMs`, so a short blip costs little and a long outage is
// not hammered. Full jitter (a random delay up to the computed one) keeps callers that failed
// together from coming back together. An error that says when to come back (`retry_after_ms`)
// is taken at its word.

export interface Backoff {
  /** The delay before the first retry; each later one doubles it. */
  minDelayMs: number;
  /** No delay is longer than this. */
  maxDelayMs: number;
  /** Full jitter: wait a random time between 0 and the computed delay. */
  jitter?: boolean;
}

/** The delay before retry number `attempt` (0 for the first): `minDelayMs · 2^attempt`, at most `maxDelayMs`. */
export function backoffMs(attempt: number, { minDelayMs, maxDelayMs, jitter = false }: Backoff): number {
  // The exponent is bounded so a long run of failures never overflows to Infinity or NaN.
  const ms = Math.min(maxDelayMs, minDelayMs * 2 ** Math.min(Math.max(0, attempt), 30));
  return jitter ? Math.floor(Math.random() * ms) : ms;
}

export interface RetryOptions extends Backoff {
  /** At most this many retries after the first try; unbounded when absent. */
  retries?: number;
  /** No retry after a failure that comes later than this after the first try; unbounded when absent. */
  untilMs?: number;
  /** Whether `err` is worth another try; by default an AppError that says it is retryable. */
  shouldRetry?: (err: unknown) => boolean;
  /** Stops the retries: a pending delay ends at once, and the signal's reason is thrown. */
  signal?: AbortSignal;
  /** Told of each failure that will be retried, before its delay. */
  onRetry?: (err: unknown, retry: { attempt: number; delayMs: number }) => void;
}

const retryableAppError = (err: unknown) => isAppError(err) && err.retryable;

/**
 * What `fn` resolves to, tried again while it fails retryably and the bounds allow; otherwise its
 * last error. `fn` gets the number of the try (0 for the first).
 */
export async function retry<T>(fn: (attempt: number) => Promise<T>, opts: RetryOptions): Promise<T> {
  const { retries = Infinity, untilMs, shouldRetry = retryableAppError, signal, onRetry } = opts;
  const deadline = untilMs === undefined ? Infinity : Date.now() + untilMs;
  for (let attempt = 0; ; attempt++) {
    signal?.throwIfAborted();
    try {
      return await fn(attempt);
    } catch (err) {
      if (attempt >= retries || Date.now() > deadline || !shouldRetry(err)) throw err;
      const delayMs = retryAfterMs(err) ?? backoffMs(attempt, opts);
      onRetry?.(err, { attempt, delayMs });
      try {
        await sleep(delayMs, undefined, signal ? { signal } : undefined);
      } catch (aborted) {
        if (signal?.aborted) throw signal.reason;
        throw aborted;
      }
    }
  }
}
