import type { WebhookReceivedEvent } from '@threadwork/contracts';
import type { z } from 'zod';
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
