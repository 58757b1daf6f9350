import { domainEvents, rpc, type EventDef, type EventInput, type SandboxStatusEvent } from '@threadwork/contracts';
import {
  domainEventDigest,
  encodeJson,
  publishEvent,
  retry,
  type JetStreamClient,
  type Logger,
  type NatsConnection,
} from '@threadwork/platform';
import { sandboxStatusMsgId } from '../domain/ids.js';
import type { SandboxStatusPublisher } from '../sandbox/provider.js';
import { callService } from './call.js';
import type { AttemptRef } from './runs.js';

// DOMAIN events the runner publishes, retried while publishing can still succeed: a run's
// outcome must not be lost to a blip, and each carries a Nats-Msg-Id so a retry is stored once.

/** A DOMAIN event that could not be published, retries included: the flow that needed it decides what follows. */
export class DomainPublishError extends Error {
  constructor(
    readonly subject: string,
    cause: unknown,
  ) {
    super(`the DOMAIN event ${subject} could not be published`, { cause });
    this.name = 'DomainPublishError';
  }
}

/**
 * Publishes a DOMAIN event with its Nats-Msg-Id, retried for about six seconds (a stream leader
 * moving takes about two); throws DomainPublishError, logged, when it still could not be.
 */
export async function publishDomain<E extends EventDef>(
  js: JetStreamClient,
  logger: Logger,
  def: E,
  event: EventInput<E>,
  msgId: string,
): Promise<void> {
  const subject = def.subject;
  try {
    // Only what retrying can help: an event its schema refuses is a defect, not a blip.
    await retry(() => publishEvent(js, def, event, { msgId }), { retries: 5, minDelayMs: 200, maxDelayMs: 3_200 });
  } catch (err) {
    logger.error({ err, subject, msg_id: msgId }, 'DOMAIN event could not be published');
    throw new DomainPublishError(subject, err);
  }
}

/**
 * Publishes a DOMAIN event about the run `ref` holds, attested first under its claim (runs.attest):
 * the services acting on a runner's event act only on one the runs service confirms its run's
 * holder published. False when the runs service refused to attest it: the attempt no longer holds
 * the run, and nothing it reports counts then. Throws DomainPublishError when the publish failed.
 */
export async function publishAttested<E extends EventDef>(
  nc: NatsConnection,
  js: JetStreamClient,
  logger: Logger,
  ref: AttemptRef,
  def: E,
  event: EventInput<E>,
  msgId: string,
): Promise<boolean> {
  const subject = def.subject;
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
  await publishDomain(js, logger, def, event, msgId);
  return true;
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
    // A status of a run is attested by its holder; a stop after idling is of no run. One that is
    // lost (logged) is corrected by the sandbox's next: the status is what the thread shows, not
    // what anything acts on.
    const publish = claim
      ? publishAttested(nc, js, logger, claim, domainEvents.sandboxStatus, event, msgId)
      : publishDomain(js, logger, domainEvents.sandboxStatus, event, msgId);
    return publish.then(
      (published) => published !== false,
      (err: unknown) => {
        if (!(err instanceof DomainPublishError)) throw err;
        return false;
      },
    );
  };
}
