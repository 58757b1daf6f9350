import { CandidateProducedEvent, DOMAIN_INTERESTS, WebhookReceivedEvent } from '@threadwork/contracts';
import { describeZodError, invalidRequest } from '@threadwork/platform';
import type { z } from 'zod';
import { gitHubAppError } from '../providers/github.js';
import { publishCandidate } from './publication.js';
import { processWebhook, type WebhookDeps } from './webhooks.js';

/** The DOMAIN subjects repohost reacts to: the filter of its durable consumer (consumers.ts). */
const SUBJECTS = DOMAIN_INTERESTS.repohost;

function parse<S extends z.ZodType>(schema: S, payload: unknown): z.output<S> {
  const parsed = schema.safeParse(payload);
  // Not retryable: the same bytes will never parse, so the consumer terminates the message.
  if (!parsed.success) throw invalidRequest(describeZodError(parsed.error));
  return parsed.data;
}

/** Handles one DOMAIN event; GitHub being down is `unavailable`, so the message is retried later. */
export function createEventHandler(deps: WebhookDeps): (subject: string, payload: unknown) => Promise<void> {
  return async (subject, payload) => {
    try {
      switch (subject) {
        case SUBJECTS.candidateProduced:
          return await publishCandidate(deps, parse(CandidateProducedEvent, payload));
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
