import { domainEvents, type WebhookReceivedEvent } from '@threadwork/contracts';
import {
  AppError,
  invalidRequest,
  publishEvent,
  unavailable,
  verifyWebhookSignature,
  type JetStreamClient,
  type Logger,
} from '@threadwork/platform';
import type { GitHubAppConfig } from '../config.js';
import { eventMismatch, parseWebhookPayload, webhookBodyHash } from '../domain/github.js';
import type { GitHubStore } from '../store/github.js';

/**
 * POST /v1/repohost/webhooks, as the gateway forwards it (the gateway checked the signature
 * already; this is the second look): the signature is checked over the raw bytes before anything
 * else (a bad or missing one is 401 and nothing is recorded); the payload must be the event its
 * header names where that is unambiguous (400); the body is tied to its delivery id (unique insert),
 * so the same signed bytes under another delivery id are a replay (401); each delivery id is taken
 * once (unique insert; a repeat is `duplicate`); and the delivery is queued on DOMAIN for the
 * consumer below, so GitHub gets its answer without waiting for any call back to GitHub.
 */
export async function receiveWebhook(
  deps: { config: GitHubAppConfig | null; store: GitHubStore | null; js: JetStreamClient; logger: Logger },
  input: {
    event: string;
    delivery: string;
    signature?: string | undefined;
    content_type?: string | undefined;
    body_base64: string;
  },
): Promise<{ status: 'accepted' | 'duplicate' }> {
  const { config, store, js, logger } = deps;
  const body = Buffer.from(input.body_base64, 'base64');
  if (!config || !store || !verifyWebhookSignature(config.webhookSecret, body, input.signature)) {
    throw new AppError('unauthorized', 'webhook signature missing or wrong');
  }
  const payload = parseWebhookPayload(input.content_type, body);
  const mismatch = eventMismatch(input.event, payload);
  if (mismatch !== null) {
    logger.warn(
      { event: input.event, delivery: input.delivery, mismatch },
      'webhook refused: event and payload disagree',
    );
    throw invalidRequest(`headers.x-github-event: does not match the payload (${mismatch})`);
  }
  const now = new Date();
  const hash = webhookBodyHash(body);
  if ((await store.recordBody(hash, input.delivery, now)) === 'other_delivery') {
    logger.warn({ event: input.event, delivery: input.delivery }, 'webhook refused: a signed body replayed');
    throw new AppError('unauthorized', 'webhook replayed: this signed body came before as another delivery');
  }
  if (!(await store.recordDelivery(input.delivery, input.event, now))) return { status: 'duplicate' };
  const event: WebhookReceivedEvent = {
    delivery: input.delivery,
    event: input.event,
    payload,
    received_at: now.toISOString(),
  };
  try {
    await publishEvent(js, domainEvents.webhookReceived, event, { msgId: `webhook:${input.delivery}` });
  } catch (err) {
    // Not queued: forget the delivery so GitHub's retry (or a redelivery) is taken, not dropped.
    await store.forgetDelivery(input.delivery);
    await store.forgetBody(hash, input.delivery);
    throw unavailable('the webhook could not be queued', err);
  }
  return { status: 'accepted' };
}
