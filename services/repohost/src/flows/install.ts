import { randomBytes } from 'node:crypto';
import type { InstallSession, LinkedInstallation } from '@threadwork/contracts';
import { invalidRequest, type Logger } from '@threadwork/platform';
import type { GitHubAppConfig } from '../config.js';
import {
  administersAccount,
  allowedReturnTos,
  identityConflict,
  installUrl,
  isAllowedReturnTo,
  linkCodeHash,
  mayLink,
  setupRedirect,
  setupReturnTo,
  verifierMatches,
  type SetupOutcome,
} from '../domain/github.js';
import { GitHubError, type GitHubClient } from '../providers/github/client.js';
import { installationDocView, type GitHubProvider } from '../providers/github/provider.js';
import type { GitHubStore } from '../store/github.js';
import type { VerifiedGitHubUser } from '../store/identities.js';
import type { InstallSessionDoc } from '../store/install-sessions.js';

export interface InstallDeps {
  config: GitHubAppConfig;
  client: GitHubClient;
  store: GitHubStore;
  github: GitHubProvider;
  logger: Logger;
}

export const notConfigured = () => invalidRequest('no GitHub App is configured');

/**
 * POST /v1/repohost/install-session: a single-use `state` for the caller, bound to the PKCE
 * challenge of a verifier only the caller's client holds, and the install URL carrying it.
 */
export async function createInstallSession(
  { config, store }: Pick<InstallDeps, 'config' | 'store'>,
  { owner_id, return_to, code_challenge }: { owner_id: string; return_to: string; code_challenge: string },
): Promise<InstallSession> {
  if (!isAllowedReturnTo(return_to, config.appScheme, config.publicBaseUrl)) {
    throw invalidRequest(`body.return_to: must be ${allowedReturnTos(config.appScheme, config.publicBaseUrl)}`);
  }
  const now = new Date();
  const state = randomBytes(24).toString('hex');
  const expiresAt = new Date(now.getTime() + config.installSessionTtlMs);
  await store.createSession({
    _id: state,
    owner_id,
    return_to,
    code_challenge,
    created_at: now,
    expires_at: expiresAt,
  });
  return { install_url: installUrl(config.webUrl, config.slug, state), expires_at: expiresAt.toISOString() };
}

/**
 * GitHub's setup callback, unauthenticated. It links nothing: the session is consumed first
 * (exactly once, whatever happens next), the installation is read with the app JWT and checked
 * against the user who came back (see `verifyInstallation`), and only then is a one-time code
 * minted and handed to the session's `return_to` — the browser that completed the setup. Only the
 * session's owner, with the verifier behind its challenge, can redeem it (`linkInstallation`).
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
  const outcome = await verifyInstallation(deps, session, input).catch((err: unknown) => {
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
  if (outcome.outcome === 'error' && outcome.error !== 'github_unavailable') {
    logger.warn(
      { owner_id: session.owner_id, installation_id: input.installation_id, reason: outcome.error },
      'setup refused',
    );
  }
  return { redirect_to: setupRedirect(session.return_to, outcome) };
}

async function verifyInstallation(
  { config, client, store, github }: InstallDeps,
  session: InstallSessionDoc,
  input: { installation_id?: number | undefined; setup_action?: string | undefined; code?: string | undefined },
): Promise<SetupOutcome> {
  // A member of an organisation asked its owners to install: there is nothing to link yet.
  if (input.setup_action === 'request') return { outcome: 'requested' };
  const installationId = input.installation_id;
  if (installationId === undefined) return { outcome: 'error', error: 'missing_installation' };
  const installation = await client.installation(installationId);
  if (installation === null) return { outcome: 'error', error: 'installation_not_found', installationId };

  let userAdministers: boolean | null = null;
  let githubUser: VerifiedGitHubUser | null = null;
  if (config.oauth) {
    if (input.code === undefined) return { outcome: 'error', error: 'unverified_installation', installationId };
    const userToken = await client.exchangeCode(input.code);
    // A link gives every repository of the installation: only who administers its account may
    // make one, not whoever can see it (a member, a collaborator on one repository).
    const account = installation.account;
    const [user, membership] = await Promise.all([
      client.user(userToken),
      account?.type === 'Organization' ? client.orgMembership(userToken, account.login) : null,
    ]);
    githubUser = { id: user.id, login: user.login, avatar_url: user.avatar_url };
    userAdministers = administersAccount({ account, githubUserId: user.id, membership });
    if (!userAdministers) return { outcome: 'error', error: 'not_installation_admin', installationId };
  }
  const allowed = mayLink({
    installationCreatedAt: new Date(installation.created_at),
    sessionCreatedAt: session.created_at,
    userAdministers,
  });
  if (!allowed) return { outcome: 'error', error: 'unverified_installation', installationId };
  if (githubUser) {
    // Said now, so the browser that completed the setup learns it; decided for good at redemption.
    const [ownerIdentity, userIdentity] = await Promise.all([
      store.identityOf(session.owner_id),
      store.identityByGitHubId(githubUser.id),
    ]);
    const conflict = identityConflict({
      ownerId: session.owner_id,
      githubUserId: githubUser.id,
      ownerGitHubId: ownerIdentity?._id ?? null,
      githubUserOwner: userIdentity?.owner_id ?? null,
    });
    if (conflict) return { outcome: 'error', error: 'github_account_mismatch', installationId };
  }

  await github.saveInstallation(installation);
  const code = randomBytes(32).toString('base64url');
  const now = new Date();
  await store.createLinkCode({
    _id: linkCodeHash(code),
    owner_id: session.owner_id,
    code_challenge: session.code_challenge,
    installation_id: installationId,
    github_user: githubUser,
    created_at: now,
    expires_at: new Date(now.getTime() + config.linkCodeTtlMs),
  });
  return { outcome: 'installed', installationId, code };
}

const CODE_REFUSED = 'body.code: unknown, expired, already used, or not from an install session of yours';

/**
 * POST /v1/repohost/installations: the setup callback's one-time code, redeemed by the owner of
 * the install session with the verifier behind its challenge. With OAuth, the GitHub user who
 * completed the setup must be the one the owner is verified as (the first redemption verifies
 * them: unique on both sides); without it, an installation is linked to one owner only.
 */
export async function linkInstallation(
  { store, logger }: Pick<InstallDeps, 'store' | 'logger'>,
  input: { owner_id: string; code: string; code_verifier: string },
): Promise<LinkedInstallation> {
  const now = new Date();
  const code = await store.linkCode(linkCodeHash(input.code));
  // Someone else's code is answered like an unknown one: nothing says it exists.
  if (!code || code.owner_id !== input.owner_id || code.expires_at.getTime() <= now.getTime()) {
    throw invalidRequest(CODE_REFUSED);
  }
  if (!verifierMatches(input.code_verifier, code.code_challenge)) {
    logger.warn({ owner_id: input.owner_id }, 'link code presented with a verifier that does not match its session');
    throw invalidRequest('body.code_verifier: does not match the code_challenge of the install session');
  }
  if (!(await store.useLinkCode(code, now))) throw invalidRequest(CODE_REFUSED);

  if (code.github_user) {
    const bound = await store.bindIdentity(input.owner_id, code.github_user, now);
    if (!bound.ok) {
      logger.warn(
        { owner_id: input.owner_id, installation_id: code.installation_id, reason: bound.reason },
        'link refused: the GitHub user who installed is not the one this owner is verified as',
      );
      throw invalidRequest(
        bound.reason === 'owner_is_another_github_user'
          ? 'body.code: the setup was completed on GitHub by another GitHub account than the one this account is verified as'
          : 'body.code: the GitHub account that completed the setup is verified for another account',
      );
    }
  } else if (!(await store.claimUnverified(code.installation_id, input.owner_id, now))) {
    logger.warn({ owner_id: input.owner_id, installation_id: code.installation_id }, 'link refused: unverified claim');
    throw invalidRequest(
      'body.code: this installation is linked to another account, and without an OAuth client nothing proves it is yours',
    );
  }

  const installation = await store.installation(code.installation_id);
  // Saved by the setup callback; gone only if GitHub said it was uninstalled since.
  if (!installation) throw invalidRequest('body.code: the installation no longer exists');
  await store.link(input.owner_id, code.installation_id, now);
  logger.info({ owner_id: input.owner_id, installation_id: code.installation_id }, 'installation linked');
  return { installation: installationDocView(installation) };
}
