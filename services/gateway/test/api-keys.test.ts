import { MAX_ACTIVE_API_KEYS_PER_USER } from '@threadwork/contracts';
import { serviceDbName } from '@threadwork/platform';
import { testInfra, uniqueId, uniqueDbPrefix, waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runAdmin } from '../src/admin/cli.js';
import { SESSION_COOKIE, signSession } from '../src/domain/session.js';
import { AUTH_CACHE_DEFAULTS, cacheAuthentication } from '../src/store/auth-cache.js';
import { forgetOnRevocation } from '../src/store/revocations.js';
import { createIdentityStore, type ApiKeyDoc, type UserDoc } from '../src/store/identity.js';
import { logger, SESSION_SECRET, startHarness, type App, type Harness } from './harness.js';

// A signed-in user manages their own API keys under /v1/keys, with a browser session
// only: a key must not mint or revoke keys. A key revoked there is refused at once by every gateway
// replica, also by one that remembered it.

const PATH = '/v1/keys';

interface ListedKey {
  id: string;
  name: string;
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

/** A user of their own, signed in: the cookie a browser would send. */
async function signedIn(): Promise<{ user: UserDoc; cookie: string }> {
  const user = await h.identity.ensureUser(uniqueId('console'));
  const session = signSession(user._id, Math.floor(Date.now() / 1000) + 3600, SESSION_SECRET);
  return { user, cookie: `${SESSION_COOKIE}=${session}` };
}

/** A gateway replica that remembers accepted keys far longer than the test runs, listening. */
async function replica(): Promise<{ app: App; url: string }> {
  const cached = cacheAuthentication(h.identity, { ...AUTH_CACHE_DEFAULTS, ttlMs: 10 * 60_000 });
  forgetOnRevocation(h.nc, cached, logger);
  const app = await h.gateway({ identity: cached });
  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, url };
}

function create(app: App, cookie: string, name: unknown, extra: Record<string, string> = {}) {
  return app.inject({ method: 'POST', url: PATH, headers: { cookie, ...extra }, payload: { name } });
}

async function list(app: App, cookie: string): Promise<ListedKey[]> {
  const res = await app.inject({ url: PATH, headers: { cookie } });
  expect(res.statusCode).toBe(200);
  return (res.json() as { keys: ListedKey[] }).keys;
}

describe('API keys in settings', () => {
  it('are created, listed and revoked with a session; a revoked key is refused by every replica', async () => {
    const { cookie } = await signedIn();
    const [a, b] = [await replica(), await replica()];
    const post = await fetch(`${a.url}${PATH}`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' },
      body: JSON.stringify({ name: 'laptop' }),
    });
    expect(post.status).toBe(201);
    const created = (await post.json()) as { api_key: ListedKey; key: string };
    expect(created.key).toMatch(/^twk_[0-9A-Za-z]{40}$/);
    expect(created.api_key).toEqual({
      id: expect.any(String),
      name: 'laptop',
      prefix: created.key.slice(0, 12),
      created_at: expect.any(String),
      last_used_at: null,
      revoked_at: null,
    });

    // The key works on both replicas, and both now remember it.
    const work = (url: string) => fetch(`${url}/v1/work`, { headers: { authorization: `Bearer ${created.key}` } });
    expect((await work(a.url)).status).toBe(200);
    expect((await work(b.url)).status).toBe(200);
    // Its use is recorded, off the request's path.
    const used = await waitFor('the key to be marked used', async () => {
      const [key] = await list(a.app, cookie);
      return key?.last_used_at ?? undefined;
    });
    expect(Date.parse(used)).toBeGreaterThanOrEqual(Date.parse(created.api_key.created_at));

    const revoke = await fetch(`${a.url}${PATH}/${created.api_key.id}`, { method: 'DELETE', headers: { cookie } });
    expect(revoke.status).toBe(204);
    expect(await revoke.text()).toBe('');
    const [revoked] = await list(a.app, cookie);
    expect(revoked).toEqual({ ...created.api_key, last_used_at: used, revoked_at: expect.any(String) });
    expect((await work(a.url)).status).toBe(401);
    const status = await waitFor(
      'the other replica to refuse the revoked key',
      async () => {
        const { status: s } = await work(b.url);
        return s === 401 ? s : undefined;
      },
      30_000,
      { intervalMs: 20 },
    );
    expect(status).toBe(401);

    // Revoking again changes nothing and answers the same.
    const again = await a.app.inject({ method: 'DELETE', url: `${PATH}/${created.api_key.id}`, headers: { cookie } });
    expect(again.statusCode).toBe(204);
    expect(again.body).toBe('');
    expect(await list(a.app, cookie)).toEqual([revoked]);
  });

  it('are refused 403 to a bearer key, however valid', async () => {
    const caller = await h.caller();
    const [own] = await h.identity.listKeys(caller.user._id);
    const answers = [
      await h.app.inject({ url: PATH, headers: caller.headers }),
      await h.app.inject({ method: 'POST', url: PATH, headers: caller.headers, payload: { name: 'more' } }),
      await h.app.inject({ method: 'DELETE', url: `${PATH}/${own!._id}`, headers: caller.headers }),
    ];
    for (const res of answers) {
      expect(res.statusCode).toBe(403);
      expect(res.json()).toEqual({
        error: {
          code: 'forbidden',
          message: 'API keys are managed from a signed-in browser session; a key cannot mint keys',
        },
      });
    }
    const keys = await h.identity.listKeys(caller.user._id);
    expect(keys.map((k) => [k._id, k.revoked_at])).toEqual([[own!._id, null]]);
  });

  it("answers 404 for another user's key and for no key, and leaves the other's key alone", async () => {
    const alice = await signedIn();
    const bob = await signedIn();
    const bobs = (await create(h.app, bob.cookie, 'ci')).json() as { api_key: ListedKey; key: string };
    for (const id of [bobs.api_key.id, 'key_nonexistent']) {
      const res = await h.app.inject({ method: 'DELETE', url: `${PATH}/${id}`, headers: { cookie: alice.cookie } });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ error: { code: 'not_found' } });
    }
    expect(await list(h.app, alice.cookie)).toEqual([]);
    expect((await list(h.app, bob.cookie)).map((k) => k.revoked_at)).toEqual([null]);
  });

  it('refuses a cross-site write with the cookie, and writes nothing', async () => {
    const { cookie } = await signedIn();
    for (const site of ['cross-site', 'same-site']) {
      const res = await create(h.app, cookie, 'csrf', { 'sec-fetch-site': site });
      expect(res.statusCode).toBe(401);
    }
    expect(await list(h.app, cookie)).toEqual([]);
    const mine = await create(h.app, cookie, 'mine', { 'sec-fetch-site': 'same-origin' });
    expect(mine.statusCode).toBe(201);
    const { id } = (mine.json() as { api_key: ListedKey }).api_key;
    const revoke = await h.app.inject({
      method: 'DELETE',
      url: `${PATH}/${id}`,
      headers: { cookie, 'sec-fetch-site': 'cross-site' },
    });
    expect(revoke.statusCode).toBe(401);
    expect((await list(h.app, cookie)).map((k) => k.revoked_at)).toEqual([null]);
  });

  it(`lets a user hold ${MAX_ACTIVE_API_KEYS_PER_USER} active keys, counting the admin CLI's`, async () => {
    const { user, cookie } = await signedIn();
    await h.identity.createKey(user._id);
    for (let i = 1; i < MAX_ACTIVE_API_KEYS_PER_USER - 1; i++) {
      expect((await create(h.app, cookie, `key ${i}`)).statusCode).toBe(201);
    }
    // The last place, asked for by many at once: exactly one gets it.
    const racing = await Promise.all(Array.from({ length: 8 }, (_, i) => create(h.app, cookie, `race ${i}`)));
    expect(racing.map((r) => r.statusCode).sort()).toEqual([201, ...Array<number>(7).fill(409)]);
    const full = await create(h.app, cookie, 'one more');
    expect(full.statusCode).toBe(409);
    expect(full.json()).toEqual({
      error: {
        code: 'too_many_api_keys',
        message: `at most ${MAX_ACTIVE_API_KEYS_PER_USER} API keys may be active at once; revoke one you no longer use first`,
      },
    });
    const keys = await list(h.app, cookie);
    expect(keys).toHaveLength(MAX_ACTIVE_API_KEYS_PER_USER);
    expect(keys[0]?.name).toBe('cli');

    // A revoked key gives its place back.
    const res = await h.app.inject({ method: 'DELETE', url: `${PATH}/${keys[3]!.id}`, headers: { cookie } });
    expect(res.statusCode).toBe(204);
    expect((await create(h.app, cookie, 'replacement')).statusCode).toBe(201);
    expect((await create(h.app, cookie, 'too many again')).statusCode).toBe(409);
  });

  it.each([
    ['an empty name', { name: '' }, 'body.name'],
    ['a blank name', { name: '   ' }, 'body.name'],
    ['a name over 100 characters', { name: 'x'.repeat(101) }, 'body.name'],
    ['no name', {}, 'body.name'],
    ['a name that is not a string', { name: 7 }, 'body.name'],
    ['a property it does not take', { name: 'ok', scopes: ['all'] }, 'body.scopes: unknown property'],
  ])('refuses %s with 400 naming the field', async (_what, payload, field) => {
    const { cookie } = await signedIn();
    const res = await h.app.inject({ method: 'POST', url: PATH, headers: { cookie }, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: { code: 'invalid_request', message: expect.stringContaining(field) } });
    expect(await list(h.app, cookie)).toEqual([]);
  });

  it('keeps a name of 100 characters, trimmed', async () => {
    const { cookie } = await signedIn();
    const name = 'n'.repeat(100);
    expect((await create(h.app, cookie, `  ${name} `)).json()).toMatchObject({ api_key: { name } });
  });

  it('never lists a key or its hash', async () => {
    const { user, cookie } = await signedIn();
    const { key } = (await create(h.app, cookie, 'secret')).json() as { key: string };
    const [stored] = await h.identity.listKeys(user._id);
    const res = await h.app.inject({ url: PATH, headers: { cookie } });
    expect(res.body).not.toContain(key);
    expect(res.body).not.toContain(stored!.hash);
    expect(Object.keys((res.json() as { keys: ListedKey[] }).keys[0]!).sort()).toEqual([
      'created_at',
      'id',
      'last_used_at',
      'name',
      'prefix',
      'revoked_at',
    ]);
  });

  it('frees a place when the admin CLI revokes a key by its prefix', async () => {
    const { user, cookie } = await signedIn();
    const made: string[] = [];
    for (let i = 0; i < MAX_ACTIVE_API_KEYS_PER_USER; i++) {
      made.push(((await create(h.app, cookie, `k${i}`)).json() as { key: string }).key);
    }
    expect((await create(h.app, cookie, 'full')).statusCode).toBe(409);
    expect(await h.identity.revokeKey(made[5]!.slice(0, 12))).toBe(1);
    expect((await create(h.app, cookie, 'after the CLI')).statusCode).toBe(201);
    const active = (await h.identity.listKeys(user._id)).filter((k) => k.revoked_at === null);
    expect(active).toHaveLength(MAX_ACTIVE_API_KEYS_PER_USER);
  });

  it("takes over keys stored before names and places, listed as the CLI's", async () => {
    const db = h.mongo.db(uniqueId('gw-legacy'));
    const user = { _id: uniqueId('usr'), login: uniqueId('old'), created_at: new Date() };
    await db.collection<UserDoc>('users').insertOne(user);
    const legacy = (n: number): ApiKeyDoc => ({
      _id: `key_legacy${n}`,
      user_id: user._id,
      prefix: `twk_legacy${n}0`,
      hash: '0'.repeat(64),
      created_at: new Date(Date.now() + n),
      revoked_at: null,
    });
    await db.collection<ApiKeyDoc>('api_keys').insertMany([legacy(1), legacy(2)]);
    const identity = createIdentityStore(db);
    // Twice, as every replica does at start.
    await identity.ensureIndexes();
    await identity.ensureIndexes();
    const app = await h.gateway({ identity });
    const cookie = `${SESSION_COOKIE}=${signSession(user._id, Math.floor(Date.now() / 1000) + 3600, SESSION_SECRET)}`;
    expect((await list(app, cookie)).map((k) => [k.id, k.name, k.last_used_at])).toEqual([
      ['key_legacy1', 'cli', null],
      ['key_legacy2', 'cli', null],
    ]);
    expect((await create(app, cookie, 'new')).statusCode).toBe(201);
    expect(await list(app, cookie)).toHaveLength(3);
  });

  it("names the admin CLI's keys with --name, else cli", async () => {
    const prefix = uniqueDbPrefix();
    const env = { MONGO_URL: testInfra().mongoUrl, MONGO_DB_PREFIX: prefix };
    const saved = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
    Object.assign(process.env, env);
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      await runAdmin(['keys', 'create', '--user', 'dana', '--name', 'deploy bot']);
      await runAdmin(['keys', 'create', '--user', 'dana']);
    } finally {
      out.mockRestore();
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    const identity = createIdentityStore(h.mongo.db(serviceDbName(prefix, 'gateway')));
    const [dana] = await identity.listUsers();
    const app = await h.gateway({ identity });
    const cookie = `${SESSION_COOKIE}=${signSession(dana!._id, Math.floor(Date.now() / 1000) + 3600, SESSION_SECRET)}`;
    expect((await list(app, cookie)).map((k) => k.name)).toEqual(['deploy bot', 'cli']);
  });
});
