import { rpc } from '@threadwork/contracts';
import { route, type JetStreamClient, type Logger, type RpcRoute } from '@threadwork/platform';
import type { RunsClient } from '../clients/runs.js';
import type { GitHubAppConfig } from '../config.js';
import { filterRepositories, pickRepositories, publicRepository } from '../domain/repositories.js';
import {
  completeSetup,
  createInstallSession,
  linkInstallation,
  notConfigured,
  type InstallDeps,
} from '../flows/install.js';
import { readPublication, type PublicationDeps } from '../flows/publication.js';
import { oauthClient, oauthUser } from '../flows/sign-in.js';
import { runnerToken } from '../flows/token.js';
import { receiveWebhook } from '../flows/webhook-intake.js';
import type { CombinedProvider } from '../providers/combined.js';
import type { GitHubClient } from '../providers/github/client.js';
import type { GitHubStore } from '../store/github.js';

export interface RoutesDeps {
  provider: CombinedProvider;
  js: JetStreamClient;
  runs: Pick<RunsClient, 'holder'>;
  logger: Logger;
  /** Everything GitHub; null when no GitHub App is configured. */
  github:
    (InstallDeps & PublicationDeps & { config: GitHubAppConfig; client: GitHubClient; store: GitHubStore }) | null;
}

export function repohostRoutes({ provider, js, github, runs, logger }: RoutesDeps): RpcRoute[] {
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

    route(rpc.repohost.token, (input) =>
      runnerToken({ provider, runs, client: github?.client ?? null, logger }, input),
    ),

    route(rpc.repohost.publication, async (input) => (github ? readPublication(github, input) : null)),

    route(rpc.repohost.oauthClient, async () => oauthClient(github)),
    route(rpc.repohost.oauthUser, (input) => oauthUser(github, input)),
  ];
}
