import type { HostedRepository, Installation, ProviderConnection } from '@threadwork/contracts';
import { AppError, unavailable, type Logger } from '@threadwork/platform';
import type { GitHubAppConfig } from '../../config.js';
import { githubRepository, installationView, installUrl, isStale } from '../../domain/github.js';
import { sortRepositories } from '../../domain/repositories.js';
import { GitHubError, type GitHubClient } from './client.js';
import type { GhInstallation } from './shapes.js';
import type { GitHubStore } from '../../store/github.js';
import type { InstallationDoc } from '../../store/installations.js';
import type { RepositoryProvider } from '../provider.js';

export interface GitHubProvider extends RepositoryProvider {
  /** Reads an installation from GitHub and stores it; null (and forgotten) when it no longer exists. */
  refreshInstallation(installationId: number): Promise<InstallationDoc | null>;
  /** Stores an installation as GitHub described it (a webhook payload or an API answer). */
  saveInstallation(installation: GhInstallation): Promise<InstallationDoc>;
}

/**
 * A GitHub failure as the caller should see it: a code and a message of ours — `unavailable` (retry)
 * when GitHub is down, rate limited or unreachable, `internal` when it refused. GitHub's own text
 * can echo what the request carried (a branch, a title, a repository name), so it goes to this
 * service's log only, under the request's id (`request_id`, which the client got as X-Request-Id).
 */
export function gitHubAppError(err: unknown, logger: Logger): unknown {
  if (!(err instanceof GitHubError)) return err;
  logger.warn({ github: gitHubErrorDetails(err) }, 'a call to GitHub failed');
  if (err.transient) return unavailable('GitHub did not answer; retry later', err);
  return new AppError('internal', 'GitHub refused the request', { cause: err, retryable: false });
}

/** What GitHub said about a failure, for the log: its status, message and errors. */
export function gitHubErrorDetails(err: GitHubError): Record<string, unknown> {
  const cause = err.cause instanceof Error ? err.cause.message : undefined;
  return {
    call: err.message,
    status: err.status,
    ...(cause === undefined ? {} : { message: cause }),
    ...(err.errors === undefined ? {} : { errors: err.errors }),
  };
}

export function installationDoc(
  installation: GhInstallation,
  now: Date,
): Omit<InstallationDoc, 'repositories_synced_at'> {
  return {
    _id: installation.id,
    account: {
      login: installation.account?.login ?? 'unknown',
      id: installation.account?.id ?? 0,
      avatar_url: installation.account?.avatar_url ?? '',
    },
    target_type: installation.target_type,
    repository_selection: installation.repository_selection,
    html_url: installation.html_url,
    suspended: Boolean(installation.suspended_at),
    created_at: new Date(installation.created_at),
    refreshed_at: now,
  };
}

/** An installation as the API shows it. */
export function installationDocView(doc: InstallationDoc): Installation {
  return installationView({
    id: doc._id,
    account: doc.account.login,
    avatarUrl: doc.account.avatar_url,
    targetType: doc.target_type,
    repositorySelection: doc.repository_selection,
    suspended: doc.suspended,
    manageUrl: doc.html_url,
  });
}

/**
 * Repositories of the GitHub App installations a user linked. Lists are cached in MongoDB, kept
 * fresh by webhooks, and read again from GitHub (with the installation's token) when older than
 * the cache TTL or invalidated by a webhook that did not carry the whole picture.
 */
export function createGitHubProvider(deps: {
  config: GitHubAppConfig;
  client: GitHubClient;
  store: GitHubStore;
  logger: Logger;
}): GitHubProvider {
  const { config, client, store, logger } = deps;
  // One refresh per installation at a time in this process; concurrent lists share it.
  const refreshing = new Map<number, Promise<void>>();

  async function saveInstallation(installation: GhInstallation): Promise<InstallationDoc> {
    const doc = installationDoc(installation, new Date());
    await store.saveInstallation(doc);
    return (await store.installation(installation.id)) ?? { ...doc, repositories_synced_at: null };
  }

  async function refreshInstallation(installationId: number): Promise<InstallationDoc | null> {
    const installation = await client.installation(installationId);
    if (installation === null) {
      logger.info({ installation_id: installationId }, 'installation no longer exists on GitHub; forgetting it');
      await store.deleteInstallation(installationId);
      return null;
    }
    return saveInstallation(installation);
  }

  function refreshRepositories(installationId: number): Promise<void> {
    const running = refreshing.get(installationId);
    if (running) return running;
    const work = (async () => {
      const startedAt = new Date();
      const listed = await client.installationRepositories(installationId);
      await store.replaceRepositories(
        installationId,
        listed.map((repo) => githubRepository(repo, installationId)),
        startedAt,
      );
    })().finally(() => refreshing.delete(installationId));
    refreshing.set(installationId, work);
    return work;
  }

  async function usableInstallations(ownerId: string): Promise<InstallationDoc[]> {
    const docs = await store.installations(await store.linkedInstallationIds(ownerId));
    return docs.filter((doc) => !doc.suspended);
  }

  return {
    name: 'github',
    refreshInstallation,
    saveInstallation,

    async connection(ownerId) {
      const now = new Date();
      const linked = await store.linkedInstallationIds(ownerId);
      let problem: string | null = null;
      const docs: InstallationDoc[] = [];
      for (const doc of await store.installations(linked)) {
        if (!isStale(doc.refreshed_at, now, config.cacheTtlMs)) {
          docs.push(doc);
          continue;
        }
        try {
          const fresh = await refreshInstallation(doc._id);
          if (fresh) docs.push(fresh);
        } catch (err) {
          logger.warn({ err, installation_id: doc._id }, 'could not refresh installation');
          problem = 'GitHub could not be reached; installations are shown as last known';
          docs.push(doc);
        }
      }
      const user = await store.user(ownerId);
      const connection: ProviderConnection = {
        status: problem ? 'error' : docs.length > 0 ? 'ready' : 'not_connected',
        ...(problem ? { message: problem } : {}),
        app_slug: config.slug,
        install_url: installUrl(config.webUrl, config.slug),
        ...(user ? { user: { id: user.github_id, login: user.login, avatar_url: user.avatar_url } } : {}),
        installations: docs.sort((a, b) => a._id - b._id).map(installationDocView),
        installation_requests: [],
      };
      return connection;
    },

    async repositories(ownerId) {
      const now = new Date();
      const installations = await usableInstallations(ownerId);
      for (const installation of installations) {
        if (!isStale(installation.repositories_synced_at, now, config.cacheTtlMs)) continue;
        try {
          await refreshRepositories(installation._id);
        } catch (err) {
          // A list read before is still worth showing; one never read cannot be made up.
          if (!installation.repositories_synced_at) throw gitHubAppError(err, logger);
          logger.warn(
            { err, installation_id: installation._id },
            'could not refresh repositories; serving the cached list',
          );
        }
      }
      const docs = await store.repositoriesOf(installations.map((installation) => installation._id));
      const repositories: HostedRepository[] = docs.map((doc) => ({
        repository_id: doc._id,
        installation_id: doc.installation_id,
        owner: doc.owner,
        name: doc.name,
        full_name: doc.full_name,
        url: doc.clone_url,
        avatar_url: doc.avatar_url,
        private: doc.private,
        default_branch: doc.default_branch,
        clone_url: doc.clone_url,
      }));
      return sortRepositories(repositories);
    },
  };
}
