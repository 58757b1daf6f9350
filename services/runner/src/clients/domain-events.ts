import { domainEvents, rpc, subjects, type SandboxStatusEvent } from '@threadwork/contracts';
import {
  domainEventDigest,
  encodeJson,
  publishJson,
  type JetStreamClient,
  type Logger,
  type NatsConnection,
} from '@threadwork/platform';
import { sandboxStatusMsgId } from '../domain/ids.js';
import type { SandboxStatusPublisher } from '../sandbox/provider.js';
import { callService, sleep } from './call.js';
import type { AttemptRef } from './runs.js';

// DOMAIN events the runner publishes, retried while publishing can still succeed: a run's
// outcome must not be lost to a blip, and each carries a Nats-Msg-Id so a retry is stored once.

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
    await callService(nc, rpc.runs.attest, {
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

/** How the sandboxes say what becomes of them: a `sandbox.status` DOMAIN event. */
export function sandboxStatusPublisher(
  nc: NatsConnection,
  js: JetStreamClient,
  logger: Logger,
): SandboxStatusPublisher {
  return async (threadId, sandboxId, status, reason, claim) => {
    const event: SandboxStatusEvent = {
      thread_id: threadId,
      run_id: claim?.run_id ?? null,
      status,
      sandbox_id: sandboxId,
      reason,
      at: new Date().toISOString(),
    };
    const msgId = sandboxStatusMsgId(threadId);
    // A status of a run is attested by its holder; a stop after idling is of no run.
    if (claim) await publishAttested(nc, js, logger, claim, domainEvents.sandboxStatus, event, msgId);
    else await publishDomain(js, logger, domainEvents.sandboxStatus, event, msgId);
  };
}
