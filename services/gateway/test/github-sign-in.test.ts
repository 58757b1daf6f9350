import { Writable } from 'node:stream';
import { createLogger } from '@threadwork/platform';
import { startGitHubApp, uniqueId, type GitHubApp } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashState, STATE_COOKIE } from '../src/domain/github-sign-in.js';
import { SESSION_COOKIE } from '../src/domain/session.js';
import { startHarness, type App, type Harness } from './harness.js';

// Sign in with GitHub, the whole way round: the gateway, the real repohost holding the GitHub App's
// OAuth client, and the fake GitHub's authorize page and code exchange (the OAuth web flow), with a
// browser played by hand: it keeps the state cookie the gateway set and sends it back.

const PUBLIC_BASE_URL = 'https://threadwork.test';
const CLIENT_ID = 'Iv1.signin-test-client';
const CLIENT_SECRET = 'signin-client-secret-that-must-never-leave-repohost';

/** Every log line of the gateway and of repohost, and every answer the gateway gave, as text. */
const seen: string[] = [];
const capture = (service: string) =>
  createLogger({
    service,
    level: 'debug',
    destination: new Writable({
      write(chunk, _encoding, done) {
        seen.push(String(chunk));
        done();
      },
    }),
  });

interface Answer {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
}
const keep = <T extends Answer>(res: T): T => {
  seen.push(JSON.stringify(res.headers), res.body);
  return res;
};

/** The value of cookie `name` among an answer's Set-Cookie headers, with its attributes. */
function setCookie(res: Answer, name: string): string | undefined {
  const all = res.headers['set-cookie'];
  const list = Array.isArray(all) ? all.map(String) : all === undefined ? [] : [String(all)];
  return list.find((line) => line.startsWith(`${name}=`));
}

describe('sign in with GitHub', () => {
  /** GITHUB_SIGN_IN_ALLOW as the gateway holds it: anyone, but where a test says otherwise. */
  const allow = { anyone: true, ids: new Set<number>(), logins: new Set<string>() };
  let gh: GitHubApp;
  let h: Harness;
  let app: App;

  beforeAll(async () => {
    gh = await startGitHubApp({
      appId: 4242,
      slug: 'threadwork-signin',
      webhookSecret: 'signin-webhook-secret',
      scheme: 'twsignin',
      oauth: { clientId: CLIENT_ID, clientSecret: CLIENT_SECRET },
    });
    gh.fake.callbackUrl = `${PUBLIC_BASE_URL}/v1/auth/github/callback`;
    h = await startHarness({
      peerEnv: { ...gh.env, PUBLIC_BASE_URL },
      repohostLogger: capture('repohost'),
      deps: { logger: capture('gateway'), githubSignInAllow: allow },
    });
    app = h.app;
  });
  afterAll(async () => {
    await h?.close();
    await gh?.fake.close();
  });

  /** A browser starts signing in: where the gateway sends it, and the state cookie it now holds. */
  async function start() {
    const res = keep(await app.inject({ url: '/v1/auth/github' }));
    expect(res.statusCode).toBe(302);
    const cookie = setCookie(res, STATE_COOKIE);
    expect(cookie).toMatch(
      /^tw_github_state=[0-9a-f]{64}; Max-Age=600; HttpOnly; Path=\/v1\/auth\/github; SameSite=Lax$/,
    );
    return { authorize: new URL(String(res.headers.location)), cookie: cookie!.split(';')[0]! };
  }

  /** The user `login` authorizes at GitHub: the callback URL GitHub sends the browser back to. */
  async function atGitHub(authorize: URL, login: string, headers: Record<string, string> = {}) {
    const res = await fetch(authorize, { headers: { 'x-fake-login': login, ...headers }, redirect: 'manual' });
    expect(res.status).toBe(302);
    return new URL(res.headers.get('location')!);
  }

  const callback = async (back: URL, cookie?: string) =>
    keep(
      await app.inject({
        url: `${back.pathname}${back.search}`,
        headers: cookie === undefined ? {} : { cookie },
      }),
    );

  const whoAmI = async (res: Answer) => {
    const session = setCookie(res, SESSION_COOKIE);
    expect(session).toBeDefined();
    return keep(await app.inject({ url: '/v1/session', headers: { cookie: session!.split(';')[0]! } }));
  };

  /** The whole flow for GitHub user `login`, from one browser. */
  async function signIn(login: string) {
    const { authorize, cookie } = await start();
    return callback(await atGitHub(authorize, login), cookie);
  }

  it('says GitHub is offered, and sends the browser to GitHub’s authorize page with a state', async () => {
    const providers = keep(await app.inject({ url: '/v1/auth/providers' }));
    expect(providers.statusCode).toBe(200);
    expect(providers.json()).toEqual({ github: true });

    const { authorize, cookie } = await start();
    expect(`${authorize.origin}${authorize.pathname}`).toBe(`${gh.fake.webUrl}/login/oauth/authorize`);
    expect(authorize.searchParams.get('client_id')).toBe(CLIENT_ID);
    expect(authorize.searchParams.get('redirect_uri')).toBe(`${PUBLIC_BASE_URL}/v1/auth/github/callback`);
    const state = authorize.searchParams.get('state')!;
    expect(state).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // The browser holds the state's hash, never the state.
    expect(cookie).toBe(`${STATE_COOKIE}=${hashState(state)}`);
  });

  it('makes a new GitHub user a Threadwork user, whose cookie works, and finds them again after a rename', async () => {
    const login = uniqueId('octo');
    gh.fake.account(login);
    const first = await signIn(login);
    expect(first.statusCode).toBe(302);
    expect(first.headers.location).toBe('/');
    expect(setCookie(first, SESSION_COOKIE)).toMatch(/; HttpOnly; Path=\/; SameSite=Lax$/);
    // The pending sign-in is cleared from the browser.
    expect(setCookie(first, STATE_COOKIE)).toMatch(/^tw_github_state=; Max-Age=0;/);
    const me = await whoAmI(first);
    expect(me.statusCode).toBe(200);
    const { user } = me.json<{ user: { id: string; login: string }; via: string }>();
    expect(me.json()).toEqual({ user: { id: user.id, login: `github:${login}` }, via: 'session' });

    const renamed = uniqueId('octo-renamed');
    gh.fake.renameAccount(login, renamed);
    const again = await signIn(renamed);
    expect(again.statusCode).toBe(302);
    const meAgain = await whoAmI(again);
    expect(meAgain.json()).toEqual({ user: { id: user.id, login: `github:${renamed}` }, via: 'session' });
    // The first session is still good: it is the same user, and nobody signed out.
    expect((await whoAmI(first)).json()).toMatchObject({ user: { id: user.id, login: `github:${renamed}` } });
  });

  it('does not merge a GitHub user into a user made by hand: the login takes the GitHub id', async () => {
    const login = uniqueId('taken');
    const account = gh.fake.account(login);
    const byHand = await h.identity.ensureUser(`github:${login}`);
    const res = await signIn(login);
    expect(res.statusCode).toBe(302);
    const { user } = (await whoAmI(res)).json<{ user: { id: string; login: string } }>();
    expect(user.id).not.toBe(byHand._id);
    expect(user.login).toBe(`github:${login}#${account.id}`);
  });

  it('lets in only the GitHub users GITHUB_SIGN_IN_ALLOW names, by login or by id, and makes no user of another', async () => {
    allow.anyone = false;
    try {
      const byLogin = uniqueId('Listed');
      gh.fake.account(byLogin);
      allow.logins.add(byLogin.toLowerCase());
      expect((await signIn(byLogin)).statusCode).toBe(302);
      // An id outlives a rename.
      const byId = uniqueId('listed-id');
      allow.ids.add(gh.fake.account(byId).id);
      const renamed = uniqueId('listed-renamed');
      gh.fake.renameAccount(byId, renamed);
      expect((await signIn(renamed)).statusCode).toBe(302);

      const stranger = uniqueId('stranger');
      gh.fake.account(stranger);
      const refused = await signIn(stranger);
      expect(refused.statusCode).toBe(401);
      expect(refused.json()).toEqual({ error: 'Unauthorized' });
      expect(setCookie(refused, SESSION_COOKIE)).toBeUndefined();
      const users = h.mongo.db(h.identityDbName).collection('users');
      expect(await users.countDocuments({ login: `github:${stranger}` })).toBe(0);
      expect(seen.some((line) => line.includes('"reason":"not_in_github_sign_in_allow"'))).toBe(true);
    } finally {
      allow.anyone = true;
    }
  });

  it('is off without GITHUB_SIGN_IN_ALLOW, though repohost has the OAuth client', async () => {
    const closed = await h.gateway({ githubSignInAllow: null });
    expect((await closed.inject({ url: '/v1/auth/providers' })).json()).toEqual({ github: false });
    for (const url of ['/v1/auth/github', `/v1/auth/github/callback?code=x&state=${'a'.repeat(43)}`]) {
      const res = await closed.inject({ url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json()).toMatchObject({ error: { code: 'not_found' } });
    }
  });

  it('refuses a state used once already', async () => {
    const login = uniqueId('replay');
    gh.fake.account(login);
    const { authorize, cookie } = await start();
    const back = await atGitHub(authorize, login);
    expect((await callback(back, cookie)).statusCode).toBe(302);
    const replayed = await callback(back, cookie);
    expect(replayed.statusCode).toBe(401);
    expect(replayed.json()).toEqual({ error: 'Unauthorized' });
    expect(setCookie(replayed, SESSION_COOKIE)).toBeUndefined();
  });

  it('refuses a state from another browser: none, or another sign-in’s cookie', async () => {
    const login = uniqueId('csrf');
    gh.fake.account(login);
    const victim = await start();
    const attacker = await start();
    const back = await atGitHub(attacker.authorize, login);
    for (const cookie of [undefined, victim.cookie, `${STATE_COOKIE}=${'0'.repeat(64)}`]) {
      const res = await callback(back, cookie);
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
      expect(setCookie(res, SESSION_COOKIE)).toBeUndefined();
    }
    // Refused before it was spent: the browser that started it still signs in with it.
    expect((await callback(back, attacker.cookie)).statusCode).toBe(302);
  });

  it('refuses an expired state', async () => {
    const login = uniqueId('late');
    gh.fake.account(login);
    const { authorize, cookie } = await start();
    const back = await atGitHub(authorize, login);
    await h.mongo
      .db(h.identityDbName)
      .collection<{ _id: string; expires_at: Date }>('github_sign_in_states')
      .updateOne(
        { _id: hashState(back.searchParams.get('state')!) },
        { $set: { expires_at: new Date(Date.now() - 1000) } },
      );
    expect((await callback(back, cookie)).statusCode).toBe(401);
  });

  it('refuses a code GitHub does not accept, and a sign-in declined at GitHub', async () => {
    const login = uniqueId('refused');
    gh.fake.account(login);
    const forged = await start();
    const back = new URL(`${PUBLIC_BASE_URL}/v1/auth/github/callback`);
    back.searchParams.set('code', 'not-a-code-github-issued');
    back.searchParams.set('state', forged.authorize.searchParams.get('state')!);
    expect((await callback(back, forged.cookie)).statusCode).toBe(401);

    const declined = await start();
    const denied = await atGitHub(declined.authorize, login, { 'x-fake-deny': '1' });
    expect(denied.searchParams.get('error')).toBe('access_denied');
    const res = await callback(denied, declined.cookie);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });

  it('answers 503 when GitHub does not answer, and the spent state is not signed in with later', async () => {
    const login = uniqueId('outage');
    gh.fake.account(login);
    const { authorize, cookie } = await start();
    const back = await atGitHub(authorize, login);
    gh.fake.failNext('GET', /^\/user$/, { status: 503, message: 'Service Unavailable' });
    const res = await callback(back, cookie);
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ error: { code: 'unavailable' } });
    expect(setCookie(res, SESSION_COOKIE)).toBeUndefined();
    expect((await callback(back, cookie)).statusCode).toBe(401);
  });

  it('logs each refusal with the request id, and never the client secret anywhere', async () => {
    const res = await callback(new URL(`${PUBLIC_BASE_URL}/v1/auth/github/callback?code=x&state=${'a'.repeat(43)}`));
    expect(res.statusCode).toBe(401);
    const requestId = String(res.headers['x-request-id']);
    const refusal = seen
      .filter((line) => line.includes('sign-in with GitHub refused'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((line) => line.reqId === requestId || line.request_id === requestId);
    expect(refusal).toMatchObject({ reason: 'state_not_this_browsers' });
    // Repohost sent the secret to GitHub (the sign-ins above worked), and it went nowhere else.
    expect(seen.some((line) => line.includes('signed in with GitHub'))).toBe(true);
    expect(seen.join('\n')).not.toContain(CLIENT_SECRET);
  });
});

describe('sign in with GitHub, not configured', () => {
  let h: Harness;
  beforeAll(async () => {
    // The real repohost with no GitHub App: only the local provider.
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('is not offered, and its paths are 404', async () => {
    expect((await h.app.inject({ url: '/v1/auth/providers' })).json()).toEqual({ github: false });
    const start = await h.app.inject({ url: '/v1/auth/github' });
    expect(start.statusCode).toBe(404);
    expect(start.json()).toMatchObject({ error: { code: 'not_found' } });
    expect(start.headers['set-cookie']).toBeUndefined();
  });
});
