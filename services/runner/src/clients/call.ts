import type { RpcEndpoint } from '@threadwork/contracts';
import { isAppError, request, retry, retryAfterMs, type NatsConnection } from '@threadwork/platform';
import type { z } from 'zod';

// A request to another service, retried while the failure says retrying can help (the service
// restarting, NATS reconnecting): a run's outcome must not be lost to a blip, and every request
// the runner makes is idempotent on the other side.

/** What `endpoint` answers, a retryable failure asked again until `retryForMs` has passed. */
export async function callService<E extends RpcEndpoint>(
  nc: NatsConnection,
  endpoint: E,
  payload: z.input<E['request']>,
  retryForMs = 30_000,
): Promise<z.output<E['response']>> {
  return retry(() => request(nc, endpoint, payload), {
    untilMs: retryForMs,
    minDelayMs: 100,
    maxDelayMs: 2_000,
    // An answer that says when to try again (a claim of a run another runner's lease holds) is the
    // caller's to schedule: a few quick retries here could not outlast it.
    shouldRetry: (err) => isAppError(err) && err.retryable && retryAfterMs(err) === null,
  });
}
