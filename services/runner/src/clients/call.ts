import type { RpcEndpoint } from '@threadwork/contracts';
import { isAppError, request, type NatsConnection } from '@threadwork/platform';
import type { z } from 'zod';

// A request to another service, retried while the failure says retrying can help (the service
// restarting, NATS reconnecting): a run's outcome must not be lost to a blip, and every request
// the runner makes is idempotent on the other side.

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** What `endpoint` answers, a retryable failure asked again until `retryForMs` has passed. */
export async function callService<E extends RpcEndpoint>(
  nc: NatsConnection,
  endpoint: E,
  payload: z.input<E['request']>,
  retryForMs = 30_000,
): Promise<z.output<E['response']>> {
  const deadline = Date.now() + retryForMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await request(nc, endpoint, payload);
    } catch (err) {
      // An answer that says when to try again (a claim of a run another runner's lease holds) is the
      // caller's to schedule: a few quick retries here could not outlast it.
      if (!isAppError(err) || !err.retryable || retryAfterMs(err) !== null || Date.now() > deadline) throw err;
      await sleep(Math.min(2_000, 100 * 2 ** attempt));
    }
  }
}

/** How long an error says to wait before trying again (`details.retry_after_ms`); null when it does not. */
export function retryAfterMs(err: unknown): number | null {
  const ms = isAppError(err) ? err.details?.retry_after_ms : undefined;
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0 ? ms : null;
}
