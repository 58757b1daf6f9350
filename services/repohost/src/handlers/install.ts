import { randomBytes } from 'node:crypto';
import type { InstallSession } from '@threadwork/contracts';
import { invalidRequest, type Logger } from '@threadwork/platform';
import type { GitHubAppConfig } from '../config.js';
import {
  installUrl,
  isAllowedReturnTo,
  mayLink,
  setupRedirect,
  setupReturnTo,
  type SetupOutcome,
} from '../domain/github.js';
import { GitHubError, type GitHubClient } from '../github/client.js';
import type { GitHubProvider } from '../providers/github.js';
import type { GitHubStore } from '../store/github.js';

export interface InstallDeps {
  config: GitHubAppConfig;
  client: GitHubClient;
  store: GitHubStore;
  github: GitHubProvider;
  logger: Logger;
}

export const notConfigured = () => invalidRequest('no GitHub App is configured');

/** POST /v1/repohost/install-session: a single-use `state` bound to the caller, and the install URL carrying it. */
export async function createInstallSession(
  { config, store }: Pick<InstallDeps, 'config' | 'store'>,
  { owner_id, return_to }: { owner_id: string; return_to: string },
): Promise<InstallSession> {
  if (!isAllowedReturnTo(return_to, config.appScheme)) {
    throw invalidRequest(`body.return_to: must be ${setupReturnTo(config.appScheme)}`);
  }
  const now = new Date();
  const state = randomBytes(24).toString('hex');
  const expiresAt = new Date(now.getTime() + config.installSessionTtlMs);
  await store.createSession({ _id: state, owner_id, return_to, created_at: now, expires_at: expiresAt });
  return { install_url: installUrl(config.webUrl, config.slug, state), expires_at: expiresAt.toISOString() };
}

/**
 * GitHub's setup callback. The session is consumed first (exactly once, whatever happens next),
 * then the installation is read with the app JWT and checked to belong to the user who came back
 * (see `mayLink`) before it is linked to the session's owner.
 */
export async function completeSetup(
  deps: InstallDeps,
  input: {
    installation_id?: number | undefined;
    setup_action?: string | undefined;
    state: string;
    code?: string | undefined;
  },
): Promise<{ redirect_to: string }> {
  const { config, store, logger } = deps;
  const consumed = await store.consumeSession(input.state, new Date());
  if (!consumed.ok) {
    return {
      redirect_to: setupRedirect(setupReturnTo(config.appScheme), { outcome: 'error', error: 'invalid_state' }),
    };
  }
  const { session } = consumed;
  const outcome = await linkInstallation(deps, session.owner_id, session.created_at, input).catch((err: unknown) => {
    if (!(err instanceof GitHubError)) throw err;
    // The session is spent either way; the user starts again from the app.
    logger.warn({ err, installation_id: input.installation_id }, 'setup could not be completed');
    const result: SetupOutcome = {
      outcome: 'error',
      // A refused OAuth code proves nothing about the user; GitHub being down is worth a retry.
      error: err.transient ? 'github_unavailable' : 'unverified_installation',
      ...(input.installation_id === undefined ? {} : { installationId: input.installation_id }),
    };
    return result;
  });
  if (outcome.outcome === 'installed') {
    logger.info({ owner_id: session.owner_id, installation_id: outcome.installationId }, 'installation linked');
  }
  return { redirect_to: setupRedirect(session.return_to, outcome) };
}

async function linkInstallation(
  { config, client, store, github }: InstallDeps,
  ownerId: string,
  sessionCreatedAt: Date,
  input: { installation_id?: number | undefined; setup_action?: string | undefined; code?: string | undefined },
): Promise<SetupOutcome> {
  // A member of an organisation asked its owners to install: there is nothing to link yet.
  if (input.setup_action === 'request') return { outcome: 'requested' };
  const installationId = input.installation_id;
  if (installationId === undefined) return { outcome: 'error', error: 'missing_installation' };
  const installation = await client.installation(installationId);
  if (installation === null) return { outcome: 'error', error: 'installation_not_found', installationId };

  let userInstallationIds: number[] | null = null;
  if (config.oauth) {
    if (input.code === undefined) return { outcome: 'error', error: 'unverified_installation', installationId };
    const userToken = await client.exchangeCode(input.code);
    const [user, visible] = await Promise.all([client.user(userToken), client.userInstallationIds(userToken)]);
    userInstallationIds = visible;
    await store.saveUser({
      _id: ownerId,
      github_id: user.id,
      login: user.login,
      avatar_url: user.avatar_url,
      verified_at: new Date(),
    });
  }
  const allowed = mayLink({
    installationId,
    installationCreatedAt: new Date(installation.created_at),
    sessionCreatedAt,
    userInstallationIds,
  });
  if (!allowed) return { outcome: 'error', error: 'unverified_installation', installationId };

  await github.saveInstallation(installation);
  await store.link(ownerId, installationId, new Date());
  return { outcome: 'installed', installationId };
}
