import type { OAuthClientResponse, OAuthUserResponse } from '@threadwork/contracts';
import { invalidRequest, notFound, unavailable, type Logger } from '@threadwork/platform';
import type { GitHubAppConfig } from '../config.js';
import { authorizeUrl, signInCallbackUrl } from '../domain/github.js';
import { gitHubErrorDetails } from '../providers/github/provider.js';
import { GitHubError, type GitHubClient } from '../providers/github/client.js';

// Sign in with GitHub, repohost's half: it holds the app's OAuth client, so the secret never leaves
// it. The gateway keeps the `state` (bound to the browser) and the users; repohost only says where
// to authorize and, given the code GitHub handed back, who the GitHub user is. The user token is
// used for `GET /user` and dropped: nothing is stored here.

export interface SignInDeps {
  config: GitHubAppConfig;
  client: Pick<GitHubClient, 'exchangeCode' | 'user'>;
  logger: Logger;
}

/** Where to send a browser to authorize; null when sign-in with GitHub is not configured. */
export function oauthClient(deps: { config: GitHubAppConfig } | null): OAuthClientResponse {
  const config = deps?.config;
  if (!config?.oauth || config.publicBaseUrl === null) return null;
  return { authorize_url: authorizeUrl(config.webUrl, config.oauth.clientId, signInCallbackUrl(config.publicBaseUrl)) };
}

/**
 * The GitHub user behind a sign-in code. A code GitHub refuses (unknown, used, expired, issued for
 * another redirect URI) is `invalid_request`; GitHub down or unreachable is `unavailable`. GitHub's
 * own words go to this log only, under the request's id.
 */
export async function oauthUser(deps: SignInDeps | null, { code }: { code: string }): Promise<OAuthUserResponse> {
  if (!deps?.config.oauth || deps.config.publicBaseUrl === null) throw notFound('sign-in with GitHub');
  const { config, client, logger } = deps;
  try {
    const token = await client.exchangeCode(code, signInCallbackUrl(config.publicBaseUrl!));
    const user = await client.user(token);
    return { github_user: { id: user.id, login: user.login } };
  } catch (err) {
    if (!(err instanceof GitHubError)) throw err;
    logger.warn({ github: gitHubErrorDetails(err) }, 'sign-in with GitHub refused');
    if (err.transient) throw unavailable('GitHub did not answer; retry later', err);
    throw invalidRequest('GitHub refused the sign-in code');
  }
}
