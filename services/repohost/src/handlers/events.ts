import { CandidateProducedEvent, DOMAIN_INTERESTS, WebhookReceivedEvent } from '@threadwork/contracts';
import { describeZodError, invalidRequest } from '@threadwork/platform';
import type { z } from 'zod';
import { publishAttestedCandidate, type CandidateDeps } from '../flows/publication.js';
import { processWebhook, type WebhookDeps } from '../flows/webhooks.js';
import { gitHubAppError } from '../providers/github/provider.js';

/** The DOMAIN subjects repohost reacts to: the filter of its durable consumer (consumers.ts). */
const SUBJECTS = DOMAIN_INTERESTS.repohost;

export type EventDeps = WebhookDeps & CandidateDeps;

function parse<S extends z.ZodType>(schema: S, payload: unknown): z.output<S> {
  const parsed = schema.safeParse(payload);
  // Not retryable: the same bytes will never parse, so the consumer terminates the message.
  if (!parsed.success) throw invalidRequest(describeZodError(parsed.error));
  return parsed.data;
}

/** Handles one DOMAIN event; GitHub being down is `unavailable`, so the message is retried later. */
export function createEventHandler(
  deps: EventDeps,
): (subject: string, payload: unknown, data: Uint8Array) => Promise<void> {
  return async (subject, payload, data) => {
    try {
      switch (subject) {
        case SUBJECTS.candidateProduced:
          return await publishAttestedCandidate(deps, subject, data, parse(CandidateProducedEvent, payload));
        case SUBJECTS.webhookReceived:
          return await processWebhook(deps, parse(WebhookReceivedEvent, payload));
        default:
          deps.logger.debug({ subject }, 'ignoring DOMAIN event');
      }
    } catch (err) {
      throw gitHubAppError(err, deps.logger);
    }
  };
}
