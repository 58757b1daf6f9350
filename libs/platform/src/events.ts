import type { PubAck } from '@nats-io/jetstream';
import type { EventDef, EventInput, EventPayload } from '@threadwork/contracts';
import { AppError, invalidRequest, unavailable } from './errors.js';
import { publishJson, type JetStreamClient, type PublishOptions } from './jetstream.js';
import type { Logger } from './logger.js';
import { describeZodError } from './rpc.js';

// DOMAIN events as contracts define them (`defineEvent`): published only once they match their
// schema, and handed to a consumer's handler only once they parse by it.

export interface EventPublishOptions extends Omit<PublishOptions, 'expectedLastSubjectSequence'> {
  /** Every DOMAIN event is deduplicated: a retry with the same id is stored once. */
  msgId: string;
}

/**
 * Publishes a DOMAIN event with its trace context and Nats-Msg-Id. The bytes sent are the event as
 * given (JSON), not its parsed form, so a digest taken over `encodeJson(event)` is the digest of
 * what readers get. An event that does not match its schema is a bug of the publisher (`internal`,
 * nothing sent); a publish JetStream does not store (NATS away, the stream refusing it) is
 * `unavailable`, so the caller's retry publishes it again.
 */
export async function publishEvent<E extends EventDef>(
  js: JetStreamClient,
  def: E,
  event: EventInput<E>,
  opts: EventPublishOptions,
): Promise<PubAck> {
  const parsed = def.schema.safeParse(event);
  if (!parsed.success) {
    throw new AppError('internal', `${def.subject}: ${describeZodError(parsed.error)}`, {
      cause: parsed.error,
      retryable: false,
    });
  }
  try {
    return await publishJson(js, def.subject, event, opts);
  } catch (err) {
    throw unavailable(`the DOMAIN event ${def.subject} could not be published`, err);
  }
}

/** A DOMAIN event as it was delivered: its subject and its bytes (what an attestation digest is of). */
export interface DeliveredEvent {
  subject: string;
  data: Uint8Array;
}

export interface EventRoute<E extends EventDef = EventDef> {
  event: E;
  handle: (event: EventPayload<E>, delivered: DeliveredEvent) => Promise<void>;
}

/** Pairs an event with its handler, keeping the handler's payload type tied to the event's schema. */
export function onEvent<E extends EventDef>(
  event: E,
  handle: (event: EventPayload<E>, delivered: DeliveredEvent) => Promise<void>,
): EventRoute {
  return { event, handle } as unknown as EventRoute;
}

/**
 * Routes each delivered message by its subject to the event it is, parsed by that event's schema.
 * A payload that does not parse is `invalid_request`, not retryable: the same bytes never will, so
 * the consumer terminates the message (and logs it with its subject). A subject no route takes is
 * not for this consumer: ignored, so acknowledged.
 */
export function eventDispatcher(
  routes: readonly EventRoute[],
  logger: Logger,
): (subject: string, payload: unknown, data: Uint8Array) => Promise<void> {
  const bySubject = new Map<string, EventRoute>();
  for (const r of routes) {
    if (bySubject.has(r.event.subject)) throw new Error(`two handlers for ${r.event.subject}`);
    bySubject.set(r.event.subject, r);
  }
  return async (subject, payload, data) => {
    const r = bySubject.get(subject);
    if (!r) {
      logger.debug({ subject }, 'ignoring DOMAIN event');
      return;
    }
    const parsed = r.event.schema.safeParse(payload);
    if (!parsed.success) throw invalidRequest(describeZodError(parsed.error));
    await r.handle(parsed.data, { subject, data });
  };
}
