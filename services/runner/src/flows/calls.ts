import { rpc, subjects, type AttemptState, type RpcEndpoint } from '@threadwork/contracts';
import {
  domainEventDigest,
  encodeJson,
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

/** One attempt of a run, as its claim made it: what the runner reads the run by. */
export interface AttemptRef {
  run_id: string;
  attempt: number;
  claim_id: string;
}

/**
 * Where the run of `ref` stands now, read by its claim (the runner reads no run for an owner).
 * `retryForMs` 0 asks once.
 */
export function readAttempt(
  nc: NatsConnection,
  ref: AttemptRef,
  retryForMs?: number,
): Promise<z.output<typeof AttemptState>> {
  const req = { run_id: ref.run_id, attempt: ref.attempt, claim_id: ref.claim_id };
  return call(nc, rpc.runs.attemptState, req, retryForMs);
}

/** Whether a run is live at `attempt`, as the runs service sees it now (a newer attempt fences an older one out). */
export async function attemptHolds(nc: NatsConnection, ref: AttemptRef): Promise<boolean> {
  const run = await readAttempt(nc, ref);
  return run.attempt === ref.attempt && !run.terminal;
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

/**
 * Publishes a DOMAIN event about the run `ref` holds, attested first under its claim (runs.attest):
 * the services acting on a runner's event act only on one the runs service confirms its run's
 * holder published. False when it was not published: the attempt no longer holds the run (nothing
 * it reports counts then), or the publish failed; either is logged.
 */
export async function publishAttested(
  nc: NatsConnection,
  js: JetStreamClient,
  logger: Logger,
  ref: AttemptRef,
  def: DomainEventDef,
  event: unknown,
  msgId: string,
): Promise<boolean> {
  const subject = subjects.domain(def.service, def.entity, def.verb);
  // The bytes publishJson sends are these: JSON of the same object.
  const digest = domainEventDigest(encodeJson(event));
  try {
    await call(nc, rpc.runs.attest, {
      run_id: ref.run_id,
      attempt: ref.attempt,
      claim_id: ref.claim_id,
      subject,
      digest,
    });
  } catch (err) {
    logger.warn({ err, subject, msg_id: msgId }, 'DOMAIN event not published: the runs service did not attest it');
    return false;
  }
  return publishDomain(js, logger, def, event, msgId);
}
