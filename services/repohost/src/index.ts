import { CONSUMERS, SERVICES } from '@threadwork/contracts';
import {
  bootService,
  consumeDomain,
  serveRoutes,
  startRuntime,
  type EventRoute,
  type Logger,
  type StartedService,
} from '@threadwork/platform';
import { createRunsClient } from './clients/runs.js';
import { threadName } from './clients/threads.js';
import { signInCallbackUrl } from './domain/github.js';
import { githubAppConfig, localRepositoriesDir, type RepohostConfig } from './config.js';
import { eventRoutes } from './handlers/events.js';
import { repohostRoutes, type RoutesDeps } from './handlers/rpc.js';
import { createGitHubClient } from './providers/github/client.js';
import { combineProviders } from './providers/combined.js';
import { createGitHubProvider } from './providers/github/provider.js';
import { createLocalProvider, ensureLocalDir } from './providers/local.js';
import { createGitHubStore } from './store/github.js';
import { createPublicationStore } from './store/publications.js';
import { createRepositoryStore } from './store/repositories.js';

export { RepohostConfig, localRepositoriesDir } from './config.js';
export { localRepositoryId } from './domain/local.js';

/** Durable name of repohost's DOMAIN consumer (candidates to publish, webhooks to process). */
export const REPOHOST_CONSUMER = CONSUMERS.repohost;

/** `logger`: where its lines go instead of standard output (tests that read them). */
export async function startRepohost(config: RepohostConfig, opts: { logger?: Logger } = {}): Promise<StartedService> {
  const runtime = await startRuntime({ name: 'repohost', config, mongo: true, ...opts });
  return bootService(runtime, async ({ db, nc, js, logger }) => {
    const runs = createRunsClient(nc);
    const store = createRepositoryStore(db);
    await store.ensureIndexes();
    const dir = localRepositoriesDir(config);
    await ensureLocalDir(dir);
    const local = createLocalProvider({ dir, store, logger });

    let github: RoutesDeps['github'] = null;
    let events: EventRoute[] = [];
    const appConfig = githubAppConfig(config);
    if (appConfig) {
      const githubStore = createGitHubStore(db);
      const publications = createPublicationStore(db);
      await githubStore.ensureIndexes();
      await publications.ensureIndexes();
      const client = createGitHubClient(appConfig);
      const provider = createGitHubProvider({ config: appConfig, client, store: githubStore, logger });
      github = {
        config: appConfig,
        client,
        store: githubStore,
        github: provider,
        publications,
        logger,
        threadName: (ownerId, threadId) => threadName(nc, ownerId, threadId),
      };

      events = eventRoutes({
        ...github,
        store: githubStore,
        github: provider,
        runs,
      });
      logger.info(
        {
          app_id: appConfig.appId,
          api: appConfig.apiUrl,
          ...(config.PUBLIC_BASE_URL
            ? {
                setup_url: `${config.PUBLIC_BASE_URL}/v1/repohost/setup`,
                webhook_url: `${config.PUBLIC_BASE_URL}/v1/repohost/webhooks`,
                ...(appConfig.oauth ? { oauth_callback_url: signInCallbackUrl(config.PUBLIC_BASE_URL) } : {}),
              }
            : {}),
        },
        'GitHub App configured',
      );
    }

    // The consumer (candidates and queued webhooks, from when the runs service first made it) is
    // read with or without a GitHub App: without one, a candidate is of a local repository, which
    // gets no pull request, and no webhook is ever queued, so each event is acked as it comes. A
    // consumer nobody reads would only pile up events; one read from the start means candidates
    // older than the App's configuration are not published once it is configured.
    await consumeDomain(runtime, {
      durable: REPOHOST_CONSUMER,
      events,
      drainMs: config.SHUTDOWN_TIMEOUT_MS,
      progressEveryMs: 10_000,
    });

    const provider = combineProviders({ local, github: github?.github ?? null, logger });
    logger.info({ provider: provider.name, dir }, 'serving repositories');
    await serveRoutes(
      runtime,
      SERVICES.repohost,
      repohostRoutes({ provider, js, github, runs, logger }),
      config.SHUTDOWN_TIMEOUT_MS,
    );
  });
}
