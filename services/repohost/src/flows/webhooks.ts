import { domainEvents, subjects, type WebhookReceivedEvent } from '@threadwork/contracts';
import {
  AppError,
  invalidRequest,
  publishJson,
  unavailable,
  verifyWebhookSignature,
  type JetStreamClient,
  type Logger,
} from '@threadwork/platform';
import type { z } from 'zod';
import type { GitHubAppConfig } from '../config.js';
import { eventMismatch, parseWebhookPayload, webhookBodyHash } from '../domain/github.js';
import {
  CheckRunEventPayload,
  CheckSuiteEventPayload,
  InstallationEventPayload,
  InstallationRepositoriesPayload,
  PullRequestEventPayload,
  RepositoryEventPayload,
  StatusEventPayload,
} from '../providers/github/shapes.js';
import type { GitHubProvider } from '../providers/github/provider.js';
import type { GitHubStore } from '../store/github.js';
import type { PublicationDoc } from '../store/publications.js';
import { syncPublication, type PublicationDeps } from './publication.js';

export const WEBHOOK_SUBJECT = subjects.domain(
  domainEvents.webhookReceived.service,
  domainEvents.webhookReceived.entity,
  domainEvents.webhookReceived.verb,
);

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
    await publishJson(js, WEBHOOK_SUBJECT, event, { msgId: `webhook:${input.delivery}` });
  } catch (err) {
    // Not queued: forget the delivery so GitHub's retry (or a redelivery) is taken, not dropped.
    await store.forgetDelivery(input.delivery);
    await store.forgetBody(hash, input.delivery);
    throw unavailable('the webhook could not be queued', err);
  }
  return { status: 'accepted' };
}

export interface WebhookDeps extends PublicationDeps {
  github: GitHubProvider;
  store: GitHubStore;
}

function parsed<S extends z.ZodType>(
  schema: S,
  payload: unknown,
  deps: WebhookDeps,
  event: string,
): z.output<S> | null {
  const result = schema.safeParse(payload);
  if (result.success) return result.data;
  // GitHub's payload, not ours: retrying cannot fix it.
  deps.logger.warn({ event, issues: result.error.issues.slice(0, 3) }, 'webhook payload not understood; ignored');
  return null;
}

async function syncAll(deps: WebhookDeps, docs: readonly PublicationDoc[]): Promise<void> {
  const seen = new Set<string>();
  for (const doc of docs) {
    if (seen.has(doc._id)) continue;
    seen.add(doc._id);
    await syncPublication(deps, doc);
  }
}

async function byPulls(deps: WebhookDeps, repositoryId: number, numbers: readonly number[]): Promise<PublicationDoc[]> {
  const found: PublicationDoc[] = [];
  for (const number of numbers) found.push(...(await deps.publications.byPull(repositoryId, number)));
  return found;
}

/**
 * A queued delivery, processed idempotently (the same delivery twice converges on the same state):
 * installations and repository lists are updated from the payload (or marked stale when it does
 * not carry the whole picture); pull request, check and status events re-read the affected
 * publications from GitHub, which is the order-proof way to follow checks.
 */
export async function processWebhook(deps: WebhookDeps, delivery: WebhookReceivedEvent): Promise<void> {
  const { store, github, publications, logger } = deps;
  const { event, payload } = delivery;
  switch (event) {
    case 'installation': {
      const p = parsed(InstallationEventPayload, payload, deps, event);
      if (!p) return;
      if (p.action === 'deleted') {
        await store.deleteInstallation(p.installation.id);
        logger.info({ installation_id: p.installation.id }, 'installation deleted on GitHub');
        return;
      }
      await github.saveInstallation(p.installation);
      if (p.action !== 'suspend') await store.markRepositoriesStale(p.installation.id);
      return;
    }
    case 'installation_repositories': {
      const p = parsed(InstallationRepositoriesPayload, payload, deps, event);
      if (!p) return;
      await github.saveInstallation(p.installation);
      await store.deleteRepositories(p.repositories_removed.map((repository) => repository.id));
      // Added ones come without default branch or clone URL: the next list reads them from GitHub.
      if (p.repositories_added.length > 0) await store.markRepositoriesStale(p.installation.id);
      return;
    }
    case 'repository': {
      const p = parsed(RepositoryEventPayload, payload, deps, event);
      if (!p) return;
      const { repository } = p;
      if (p.action === 'deleted' || p.action === 'transferred') {
        const cached = await store.repository(repository.id);
        await store.deleteRepositories([repository.id]);
        if (cached && p.action === 'transferred') await store.markRepositoriesStale(cached.installation_id);
        return;
      }
      if (await store.repository(repository.id)) {
        await store.updateRepository(repository.id, {
          owner: repository.owner.login,
          name: repository.name,
          full_name: repository.full_name,
          clone_url: repository.clone_url,
          avatar_url: repository.owner.avatar_url,
          private: repository.private,
          default_branch: repository.default_branch,
        });
      }
      return;
    }
    case 'pull_request': {
      const p = parsed(PullRequestEventPayload, payload, deps, event);
      if (!p) return;
      await syncAll(deps, await publications.byPull(p.repository.id, p.pull_request.number));
      return;
    }
    case 'check_run': {
      const p = parsed(CheckRunEventPayload, payload, deps, event);
      if (!p) return;
      const numbers = (p.check_run.pull_requests ?? []).map((pull) => pull.number);
      await syncAll(deps, [
        ...(await publications.byHead(p.repository.id, p.check_run.head_sha)),
        ...(await byPulls(deps, p.repository.id, numbers)),
      ]);
      return;
    }
    case 'check_suite': {
      const p = parsed(CheckSuiteEventPayload, payload, deps, event);
      if (!p) return;
      const numbers = (p.check_suite.pull_requests ?? []).map((pull) => pull.number);
      await syncAll(deps, [
        ...(await publications.byHead(p.repository.id, p.check_suite.head_sha)),
        ...(await byPulls(deps, p.repository.id, numbers)),
      ]);
      return;
    }
    case 'status': {
      const p = parsed(StatusEventPayload, payload, deps, event);
      if (!p) return;
      await syncAll(deps, await publications.byHead(p.repository.id, p.sha));
      return;
    }
    default:
      logger.debug({ event, delivery: delivery.delivery }, 'webhook event not handled');
  }
}
