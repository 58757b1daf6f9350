import { rpc, type HolderResponse } from '@threadwork/contracts';
import {
  invalidRequest,
  isAppError,
  route,
  type JetStreamClient,
  type Logger,
  type RpcRoute,
} from '@threadwork/platform';
import type { z } from 'zod';
import type { GitHubAppConfig } from '../config.js';
import { filterRepositories, pickRepositories, publicRepository } from '../domain/repositories.js';
import type { GitHubClient } from '../providers/github/client.js';
import type { CombinedProvider } from '../providers/combined.js';
import { gitHubAppError } from '../providers/github/provider.js';
import type { GitHubStore } from '../store/github.js';
import {
  completeSetup,
  createInstallSession,
  linkInstallation,
  notConfigured,
  type InstallDeps,
} from '../flows/install.js';
import { readPublication, type PublicationDeps } from '../flows/publication.js';
import { receiveWebhook } from '../flows/webhooks.js';

/** A token handed to the runner lives at least this long: long enough to clone and push. */
const TOKEN_MIN_LIFETIME_MS = 15 * 60_000;

export interface RoutesDeps {
  provider: CombinedProvider;
  js: JetStreamClient;
  /** The runs service's answer to "does this claim hold this live run, and what may it reach?". */
  holder: (runId: string, claimId: string) => Promise<z.output<typeof HolderResponse>>;
  logger: Logger;
  /** Everything GitHub; null when no GitHub App is configured. */
  github:
    (InstallDeps & PublicationDeps & { config: GitHubAppConfig; client: GitHubClient; store: GitHubStore }) | null;
}

export function repohostRoutes({ provider, js, github, holder, logger }: RoutesDeps): RpcRoute[] {
  return [
    route(rpc.repohost.connection, ({ owner_id }) => provider.connection(owner_id)),
    route(rpc.repohost.repositories, async ({ owner_id, q }) => ({
      repositories: filterRepositories(await provider.repositories(owner_id), q).map(publicRepository),
    })),
    route(rpc.repohost.access, async ({ owner_id, repository_ids }) => ({
      repositories: pickRepositories(await provider.repositories(owner_id), repository_ids),
    })),

    route(rpc.repohost.installSession, async (input) => {
      if (!github) throw notConfigured();
      return createInstallSession(github, input);
    }),
    route(rpc.repohost.setup, async (input) => {
      if (!github) throw notConfigured();
      return completeSetup(github, input);
    }),
    route(rpc.repohost.link, async (input) => {
      if (!github) throw notConfigured();
      return linkInstallation(github, input);
    }),
    route(rpc.repohost.webhook, (input) =>
      receiveWebhook({ config: github?.config ?? null, store: github?.store ?? null, js, logger }, input),
    ),

    route(rpc.repohost.token, async ({ run_id, claim_id, repository_ids }) => {
      // For the runner that holds a live run, for that run's repositories, as the run's owner:
      // never for whichever owner and repositories a caller names.
      let held: z.output<typeof HolderResponse>;
      try {
        held = await holder(run_id, claim_id);
      } catch (err) {
        if (isAppError(err) && (err.code === 'already_settled' || err.code === 'not_found')) {
          logger.warn({ run_id, reason: err.message }, 'refused a token: the caller does not hold the run');
        }
        throw err;
      }
      const foreign = repository_ids.filter((id) => !held.repository_ids.includes(id));
      if (foreign.length > 0) {
        logger.warn({ run_id, repository_ids: foreign }, 'refused a token for repositories that are not the run’s');
        throw invalidRequest(`repository_ids: ${foreign.join(', ')} not a repository of run ${run_id}`);
      }
      const owner_id = held.owner_id;
      const sourced = await provider.sourced(owner_id);
      // not_found for any the owner cannot see, as for access.
      const picked = pickRepositories(
        sourced.map(({ repository }) => repository),
        repository_ids,
      );
      const remote = sourced.filter(
        ({ source, repository }) =>
          source === 'github' && picked.some((p) => p.repository_id === repository.repository_id),
      );
      if (remote.length === 0) return { token: null, expires_at: null };
      if (remote.length !== picked.length)
        throw invalidRequest('repository_ids: ask for local and GitHub repositories separately');
      const installations = new Set(remote.map(({ repository }) => repository.installation_id));
      const [installationId] = installations;
      if (installations.size > 1 || installationId === undefined || !github) {
        throw invalidRequest('repository_ids: one token covers repositories of one installation; ask per installation');
      }
      try {
        const token = await github.client.installationToken(installationId, repository_ids, TOKEN_MIN_LIFETIME_MS);
        return { token: token.token, expires_at: token.expiresAt };
      } catch (err) {
        throw gitHubAppError(err, logger);
      }
    }),

    route(rpc.repohost.publication, async (input) => (github ? readPublication(github, input) : null)),
  ];
}
