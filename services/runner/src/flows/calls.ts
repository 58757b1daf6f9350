import { rpc, subjects, type RpcEndpoint } from '@threadwork/contracts';
import {
  isAppError,
  publishJson,
  request,
  type JetStreamClient,
  type Logger,
  type NatsConnection,
} from '@threadwork/platform';
import type { z } from 'zod';

// The runner's calls out: requests to the runs service and DOMAIN events. Both are retried while
// the failure says retrying can help (the runs service restarting, NATS reconnecting): a run's
// outcome must not be lost to a blip, and every call here is idempotent on the other side.

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export async function call<E extends RpcEndpoint>(
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
      if (!isAppError(err) || !err.retryable || Date.now() > deadline) throw err;
      await sleep(Math.min(2_000, 100 * 2 ** attempt));
    }
  }
}

/** Whether a run is live at `attempt`, as the runs service sees it now (a newer attempt fences an older one out). */
export async function attemptHolds(nc: NatsConnection, runId: string, attempt: number): Promise<boolean> {
  const run = await call(nc, rpc.runs.get, { run_id: runId });
  return run.attempt === attempt && !run.terminal;
}

export interface DomainEventDef {
  service: string;
  entity: string;
  verb: string;
}

/** Publishes a DOMAIN event with its Nats-Msg-Id; a failure after the retries is logged, not thrown. */
export async function publishDomain(
  js: JetStreamClient,
  logger: Logger,
  def: DomainEventDef,
  event: unknown,
  msgId: string,
): Promise<boolean> {
  const subject = subjects.domain(def.service, def.entity, def.verb);
  for (let attempt = 0; attempt < 6; attempt++) {
    try {
      await publishJson(js, subject, event, { msgId });
      return true;
    } catch (err) {
      if (attempt === 5) {
        logger.error({ err, subject, msg_id: msgId }, 'DOMAIN event could not be published');
        return false;
      }
      await sleep(200 * 2 ** attempt);
    }
  }
  return false;
}
