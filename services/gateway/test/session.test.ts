import { createHmac } from 'node:crypto';
import { uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateLoginToken } from '../src/domain/login-links.js';
import { SESSION_COOKIE, signSession } from '../src/domain/session.js';
import { AUTH_CACHE_DEFAULTS, cacheAuthentication } from '../src/store/auth-cache.js';
import { SESSION_SECRET, startHarness, type App, type Harness } from './harness.js';

const FIFTEEN_MINUTES = 15 * 60_000;

describe('login links, sessions and signing out', () => {
  let harness: Harness;
  let app: App;
  /** A second replica on the same database, remembering API keys as deployed replicas do. */
  let replica: App;

  beforeAll(async () => {
    // Answered by the gateway and its database alone: nothing here reaches a service.
    harness = await startHarness({ peers: 'none' });
    app = harness.app;
    replica = await harness.gateway({ identity: cacheAuthentication(harness.identity, AUTH_CACHE_DEFAULTS) });
  });
  afterAll(async () => {
    await harness?.close();
  });

  const newUser = () => harness.identity.ensureUser(uniqueId('web'));
  const linkFor = async (userId: string, ttlMs = FIFTEEN_MINUTES) => harness.identity.createLoginLink(userId, ttlMs);
  const login = (token: string, query = '', on: App = app, headers: Record<string, string> = {}) =>
    on.inject({ url: `/v1/auth/link?code=${encodeURIComponent(token)}${query}`, headers });
  /** The session cookie a login answered with, as a browser sends it back. */
  const cookieOf = (res: { headers: Record<string, unknown> }) => {
    const set = String(res.headers['set-cookie']);
    expect(set).toMatch(new RegExp(`^${SESSION_COOKIE}=[^;]+;`));
    return { cookie: set.split(';')[0]! };
  };
  const whoAmI = (headers: Record<string, string>, on: App = app) => on.inject({ url: '/v1/session', headers });

  it('signs a browser in once with a link, and says who is signed in', async () => {
    const user = await newUser();
    const token = await linkFor(user._id);
    const res = await login(token);
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toBe('/');
    expect(res.headers['cache-control']).toBe('no-store');
    const session = cookieOf(res);

    const me = await whoAmI(session);
    expect(me.statusCode).toBe(200);
    expect(me.json()).toEqual({ user: { id: user._id, login: user.login }, via: 'session' });

    const again = await login(token);
    expect(again.statusCode).toBe(401);
    expect(again.json()).toEqual({ error: 'Unauthorized' });
    expect(again.headers['set-cookie']).toBeUndefined();
  });

  it('stores only a hash of the token', async () => {
    const user = await newUser();
    const token = await linkFor(user._id);
    const stored = await harness.mongo
      .db(harness.identityDbName)
      .collection('login_links')
      .find({ user_id: user._id })
      .toArray();
    expect(stored).toHaveLength(1);
    expect(JSON.stringify(stored)).not.toContain(token);
    expect(stored[0]).toMatchObject({ used_at: null });
  });

  it('lets exactly one redemption win when both replicas see a link at once', async () => {
    const user = await newUser();
    const token = await linkFor(user._id);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => login(token, '', i % 2 ? replica : app)));
    const statuses = answers.map((res) => res.statusCode).sort();
    expect(statuses).toEqual([302, 401, 401, 401, 401, 401, 401, 401]);
  });

  it.each([
    ['an expired link', async (userId: string) => linkFor(userId, 0)],
    ['a forged token', async () => generateLoginToken()],
    ['a malformed token', async () => 'not-a-token'],
  ])('refuses %s with 401', async (_what, make) => {
    const user = await newUser();
    const res = await login(await make(user._id));
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('refuses a login without a code as an invalid request', async () => {
    const res = await app.inject({ url: '/v1/auth/link' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request' } });
  });

  it('goes on to a path of this origin and nowhere else', async () => {
    const user = await newUser();
    const go = async (next: string) =>
      (await login(await linkFor(user._id), `&next=${encodeURIComponent(next)}`)).headers.location;
    expect(await go('/threads/thr_1?tab=runs')).toBe('/threads/thr_1?tab=runs');
    for (const away of ['//evil.com', '/\\evil.com', 'https://evil.com', '/\t/evil.com', 'evil.com']) {
      expect(await go(away), away).toBe('/');
    }
  });

  it('sets an HttpOnly, Lax cookie for the whole origin, Secure only over TLS', async () => {
    const user = await newUser();
    const plain = String((await login(await linkFor(user._id))).headers['set-cookie']);
    expect(plain).toMatch(/; HttpOnly(;|$)/);
    expect(plain).toMatch(/; Path=\/(;|$)/);
    expect(plain).toMatch(/; SameSite=Lax(;|$)/);
    expect(plain).toMatch(/; Max-Age=604800(;|$)/);
    expect(plain).not.toMatch(/Secure/);

    // A client that claims TLS itself is not believed; a proxy trusted by TRUST_PROXY is.
    const https = { 'x-forwarded-proto': 'https' };
    const untrusted = String((await login(await linkFor(user._id), '', app, https)).headers['set-cookie']);
    expect(untrusted).not.toMatch(/Secure/);
    const behindProxy = await harness.gateway({ trustProxy: ['loopback'] });
    const trusted = String((await login(await linkFor(user._id), '', behindProxy, https)).headers['set-cookie']);
    expect(trusted).toMatch(/; Secure(;|$)/);
    expect(trusted).toMatch(/; SameSite=Lax(;|$)/);
  });

  it('says a caller with an API key came with one, and answers 401 to no one', async () => {
    const caller = await harness.caller();
    const me = await whoAmI(caller.headers);
    expect(me.json()).toEqual({ user: { id: caller.user._id, login: caller.user.login }, via: 'api_key' });
    const nobody = await whoAmI({});
    expect(nobody.statusCode).toBe(401);
    expect(nobody.json()).toEqual({ error: 'Unauthorized' });
  });

  it('refuses the older three-part cookie, even correctly signed', async () => {
    const user = await newUser();
    const payload = `${user._id}.${Math.floor(Date.now() / 1000) + 3600}`;
    const old = `${payload}.${createHmac('sha256', SESSION_SECRET).update(payload).digest('base64url')}`;
    const res = await whoAmI({ cookie: `${SESSION_COOKIE}=${old}` });
    expect(res.statusCode).toBe(401);
  });

  it('signs out every session of the user, on every replica, and clears the cookie', async () => {
    const user = await newUser();
    const here = cookieOf(await login(await linkFor(user._id)));
    const elsewhere = cookieOf(await login(await linkFor(user._id), '', replica));
    const { key } = await harness.identity.createKey(user._id);
    expect((await whoAmI(here, replica)).statusCode).toBe(200);

    const out = await app.inject({
      method: 'POST',
      url: '/v1/auth/logout',
      headers: { ...here, 'sec-fetch-site': 'same-origin' },
    });
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(new RegExp(`^${SESSION_COOKIE}=; Max-Age=0;`));

    for (const [session, on] of [
      [here, app],
      [here, replica],
      [elsewhere, replica],
      [elsewhere, app],
    ] as const) {
      expect((await whoAmI(session, on)).statusCode).toBe(401);
    }
    // API keys are another matter: signing out leaves them working.
    expect((await whoAmI({ authorization: `Bearer ${key}` }, replica)).json()).toMatchObject({ via: 'api_key' });
    // A new sign-in carries the new epoch and works everywhere.
    const fresh = cookieOf(await login(await linkFor(user._id)));
    expect((await whoAmI(fresh, replica)).statusCode).toBe(200);
  });

  it('keeps sessions when one of the user’s API keys is revoked', async () => {
    const user = await newUser();
    const session = cookieOf(await login(await linkFor(user._id)));
    const { id } = await harness.identity.createKey(user._id);
    expect(await harness.identity.revokeKey(id)).toBe(1);
    expect((await whoAmI(session)).statusCode).toBe(200);
  });

  it('signs out only with the cookie, and refuses a sign-out from another origin', async () => {
    const user = await newUser();
    const { key } = await harness.identity.createKey(user._id);
    const withKey = await app.inject({
      method: 'POST',
      url: '/v1/auth/logout',
      headers: { authorization: `Bearer ${key}` },
    });
    expect(withKey.statusCode).toBe(400);
    expect(withKey.json()).toMatchObject({ error: { code: 'invalid_request' } });

    const session = cookieOf(await login(await linkFor(user._id)));
    for (const site of ['cross-site', 'same-site', 'none']) {
      const forged = await app.inject({
        method: 'POST',
        url: '/v1/auth/logout',
        headers: { ...session, 'sec-fetch-site': site },
      });
      expect(forged.statusCode, site).toBe(401);
    }
    expect((await whoAmI(session)).statusCode).toBe(200);
  });

  it('issues admin-style cookies at the user’s current epoch', async () => {
    const user = await newUser();
    const inAnHour = Math.floor(Date.now() / 1000) + 3600;
    const before = signSession(user._id, inAnHour, SESSION_SECRET);
    expect((await whoAmI({ cookie: `${SESSION_COOKIE}=${before}` })).statusCode).toBe(200);
    const epoch = await harness.identity.endSessions(user._id);
    expect(epoch).toBe(1);
    expect((await whoAmI({ cookie: `${SESSION_COOKIE}=${before}` })).statusCode).toBe(401);
    const after = signSession(user._id, inAnHour, SESSION_SECRET, epoch);
    expect((await whoAmI({ cookie: `${SESSION_COOKIE}=${after}` })).statusCode).toBe(200);
  });
});
