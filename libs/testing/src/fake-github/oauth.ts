import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, readBody, sendJson } from './http.js';
import type { GitHubState } from './state.js';

// GitHub's web side, as a browser and the app's server meet it: the app's install page, the OAuth
// web flow's authorize page, and the code exchange. GitHub's OpenAPI descriptions do not cover
// these pages (they are not REST), so they follow GitHub's documented web flow ("Generating a user
// access token for a GitHub App"): `GET /login/oauth/authorize?client_id&redirect_uri&state` sends
// the browser back to `redirect_uri` with `code` and `state` (or `error=access_denied`, or to the
// registered callback with `error=redirect_uri_mismatch`); `POST /login/oauth/access_token` takes
// `client_id`, `client_secret`, `code` and an optional `redirect_uri` that must be the one the code
// went to; a code is single-use and lives ten minutes; failures are 200 with `error`. What the
// user token then reads (`GET /user`) is a REST answer, checked like the others.

export function createOAuth(
  state: GitHubState,
  /** The app's Setup URL, which a test may change after the fake started. */
  setupUrl: () => string,
  oauth: { clientId: string; clientSecret: string } | undefined,
  /** The app's Callback URL, which a test may change after the fake started. */
  callbackUrl: () => string,
) {
  /**
   * The signed-in user (`x-fake-login`) installs the app (all repositories) on their own account,
   * or on the organisation named by `x-fake-target` if they own it, and is sent to the setup URL.
   * A member who does not own the organisation can only ask its owners: `setup_action=request`,
   * no installation. With the app's OAuth client, the redirect carries the user's `code`.
   */
  function installPage(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const login = req.headers['x-fake-login'];
    if (typeof login !== 'string' || !state.accounts.has(login))
      throw new HttpError(401, 'sign in first (x-fake-login)');
    const targetHeader = req.headers['x-fake-target'];
    const targetLogin = typeof targetHeader === 'string' ? targetHeader : login;
    const role = targetLogin === login ? 'admin' : state.memberships.get(targetLogin)?.get(login);
    if (!role) throw new HttpError(404, `${login} cannot install on ${targetLogin}`);
    const target = new URL(setupUrl());
    if (role === 'admin') {
      const existing = [...state.installations.values()].find((i) => i.account.login === targetLogin);
      const installation = existing ?? state.install(targetLogin);
      target.searchParams.set('installation_id', String(installation.id));
      target.searchParams.set('setup_action', existing ? 'update' : 'install');
    } else {
      target.searchParams.set('setup_action', 'request');
    }
    const returnState = url.searchParams.get('state');
    if (returnState !== null) target.searchParams.set('state', returnState);
    if (oauth) target.searchParams.set('code', state.oauthCode(login));
    res.writeHead(302, { location: target.href });
    res.end();
  }

  /**
   * The authorize page: the signed-in user (`x-fake-login`) authorizes the app (it asks nothing, so
   * GitHub shows no prompt) and is sent to `redirect_uri` with a code and the client's `state`;
   * `x-fake-deny: 1` cancels instead (`error=access_denied`). An unknown client is GitHub's 404
   * page; a `redirect_uri` other than the registered callback URL is sent to the callback URL with
   * `error=redirect_uri_mismatch`.
   */
  function authorizePage(req: IncomingMessage, res: ServerResponse, url: URL): void {
    if (!oauth || url.searchParams.get('client_id') !== oauth.clientId) throw new HttpError(404, 'Not Found');
    const login = req.headers['x-fake-login'];
    if (typeof login !== 'string' || !state.accounts.has(login))
      throw new HttpError(401, 'sign in first (x-fake-login)');
    const given = url.searchParams.get('redirect_uri');
    const returnState = url.searchParams.get('state');
    const registered = callbackUrl();
    const back = (target: string, params: Record<string, string>) => {
      const location = new URL(target);
      for (const [name, value] of Object.entries(params)) location.searchParams.set(name, value);
      if (returnState !== null) location.searchParams.set('state', returnState);
      res.writeHead(302, { location: location.href });
      res.end();
    };
    if (given !== null && given !== registered) {
      return back(registered, {
        error: 'redirect_uri_mismatch',
        error_description: 'The redirect_uri MUST match the registered callback URL for this application.',
        error_uri:
          'https://docs.github.com/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#redirect-uri-mismatch',
      });
    }
    if (req.headers['x-fake-deny'] === '1') {
      return back(registered, {
        error: 'access_denied',
        error_description: 'The user has denied your application access.',
        error_uri:
          'https://docs.github.com/apps/managing-oauth-apps/troubleshooting-authorization-request-errors/#access-denied',
      });
    }
    return back(registered, { code: state.oauthCode(login, given) });
  }

  async function oauthExchange(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = (await readBody(req)).toString('utf8');
    const params: Record<string, unknown> = (req.headers['content-type'] ?? '').includes('json')
      ? (JSON.parse(raw) as Record<string, unknown>)
      : Object.fromEntries(new URLSearchParams(raw));
    if (!oauth || params.client_id !== oauth.clientId || params.client_secret !== oauth.clientSecret) {
      return sendJson(res, 200, oauthError('incorrect_client_credentials'));
    }
    const code = typeof params.code === 'string' ? state.codes.get(params.code) : undefined;
    if (!code || code.expires_at <= Date.now()) return sendJson(res, 200, oauthError('bad_verification_code'));
    // A code that went to a redirect URI is exchanged only with that URI (or none).
    if (params.redirect_uri !== undefined && code.redirect_uri !== null && params.redirect_uri !== code.redirect_uri) {
      return sendJson(res, 200, oauthError('redirect_uri_mismatch'));
    }
    state.codes.delete(params.code as string);
    const login = code.login;
    const token = `ghu_${randomBytes(18).toString('hex')}`;
    state.tokens.set(token, {
      kind: 'user',
      installation_id: null,
      login,
      repository_ids: null,
      permissions: {},
      expires_at: Date.now() + 8 * 60 * 60 * 1000,
    });
    return sendJson(res, 200, { access_token: token, token_type: 'bearer', scope: '' });
  }

  return { installPage, authorizePage, oauthExchange };
}

const OAUTH_ERRORS: Record<string, string> = {
  incorrect_client_credentials: 'The client_id and/or client_secret passed are incorrect.',
  bad_verification_code: 'The code passed is incorrect or expired.',
  redirect_uri_mismatch: 'The redirect_uri MUST match the registered callback URL for this application.',
};

/** GitHub's failure of the code exchange: 200, with `error`, `error_description` and `error_uri`. */
function oauthError(error: string): Record<string, string> {
  return {
    error,
    error_description: OAUTH_ERRORS[error] ?? error,
    error_uri: `https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#${error.replaceAll('_', '-')}`,
  };
}
