import {
  CandidateProducedEvent,
  DOMAIN_INTERESTS,
  WebhookReceivedEvent,
  type AttestationRequest,
  type AttestationResponse,
} from '@threadwork/contracts';
import { describeZodError, invalidRequest, repositoryEventAttestation } from '@threadwork/platform';
import type { z } from 'zod';
import { gitHubAppError } from '../providers/github/provider.js';
import { publishCandidate } from '../flows/publication.js';
import { processWebhook, type WebhookDeps } from '../flows/webhooks.js';

/** The DOMAIN subjects repohost reacts to: the filter of its durable consumer (consumers.ts). */
const SUBJECTS = DOMAIN_INTERESTS.repohost;

export interface EventDeps extends WebhookDeps {
  /** The runs service's answer: is this runner event one its run's holder published, about that run as it is? */
  attestation(req: z.input<typeof AttestationRequest>): Promise<z.output<typeof AttestationResponse>>;
}

function parse<S extends z.ZodType>(schema: S, payload: unknown): z.output<S> {
  const parsed = schema.safeParse(payload);
  // Not retryable: the same bytes will never parse, so the consumer terminates the message.
  if (!parsed.success) throw invalidRequest(describeZodError(parsed.error));
  return parsed.data;
}

/**
 * A candidate is published (a pull request opened or updated, as its owner's installation) only
 * when the runs service confirms it: the holder of its run attested these very bytes, and the run
 * is of that thread and owner, with that repository. Anyone with the runner's NATS key can publish
 * on `evt.runner.>`; what they publish alone opens no pull request. Ignored ones are logged.
 */
async function onCandidate(deps: EventDeps, subject: string, data: Uint8Array, event: CandidateProducedEvent) {
  const answer = await deps.attestation(repositoryEventAttestation(subject, data, event));
  if (!answer.confirmed) {
    deps.logger.warn(
      { run_id: event.run_id, thread_id: event.thread_id, repository_id: event.repository_id, reason: answer.reason },
      'candidate not published: its run’s holder did not produce it',
    );
    return;
  }
  await publishCandidate(deps, event);
}

/** Handles one DOMAIN event; GitHub being down is `unavailable`, so the message is retried later. */
export function createEventHandler(
  deps: EventDeps,
): (subject: string, payload: unknown, data: Uint8Array) => Promise<void> {
  return async (subject, payload, data) => {
    try {
      switch (subject) {
        case SUBJECTS.candidateProduced:
          return await onCandidate(deps, subject, data, parse(CandidateProducedEvent, payload));
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
