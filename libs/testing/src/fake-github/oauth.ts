import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, readBody, sendJson } from './http.js';
import type { GitHubState } from './state.js';

// GitHub's web side, as a browser and the app's server meet it: the app's install page and the
// OAuth code exchange.

export function createOAuth(
  state: GitHubState,
  /** The app's Setup URL, which a test may change after the fake started. */
  setupUrl: () => string,
  oauth: { clientId: string; clientSecret: string } | undefined,
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

  async function oauthExchange(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = (await readBody(req)).toString('utf8');
    const params: Record<string, unknown> = (req.headers['content-type'] ?? '').includes('json')
      ? (JSON.parse(raw) as Record<string, unknown>)
      : Object.fromEntries(new URLSearchParams(raw));
    if (!oauth || params.client_id !== oauth.clientId || params.client_secret !== oauth.clientSecret) {
      return sendJson(res, 200, { error: 'incorrect_client_credentials' });
    }
    const login = typeof params.code === 'string' ? state.codes.get(params.code) : undefined;
    if (!login) return sendJson(res, 200, { error: 'bad_verification_code' });
    state.codes.delete(params.code as string);
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

  return { installPage, oauthExchange };
}
