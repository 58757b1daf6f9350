import { domainEvents } from '@threadwork/contracts';
import { onEvent, type EventRoute } from '@threadwork/platform';
import { publishAttestedCandidate, type CandidateDeps } from '../flows/publication.js';
import { processWebhook, type WebhookDeps } from '../flows/webhooks.js';
import { gitHubAppError } from '../providers/github/provider.js';

export type EventDeps = WebhookDeps & CandidateDeps;

/**
 * The DOMAIN events repohost reacts to (those of its durable consumer's filter, consumers.ts). GitHub
 * being down is `unavailable`, so the message is retried later.
 */
export function eventRoutes(deps: EventDeps): EventRoute[] {
  const gitHubErrors = async (work: () => Promise<void>): Promise<void> => {
    try {
      await work();
    } catch (err) {
      throw gitHubAppError(err, deps.logger);
    }
  };
  return [
    onEvent(domainEvents.candidateProduced, (event, { subject, data }) =>
      gitHubErrors(() => publishAttestedCandidate(deps, subject, data, event)),
    ),
    onEvent(domainEvents.webhookReceived, (event) => gitHubErrors(() => processWebhook(deps, event))),
  ];
}
