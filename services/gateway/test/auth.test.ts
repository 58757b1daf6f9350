import { connectMongo, createLogger, type MongoClient } from '@threadwork/platform';
import { testInfra, uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../src/server.js';
import { createIdentityStore, type IdentityStore } from '../src/store/identity.js';
import { isWellFormedKey, keyPrefix } from '../src/domain/keys.js';

describe('gateway authentication', () => {
  let mongo: MongoClient;
  let identity: IdentityStore;
  let app: Awaited<ReturnType<typeof buildServer>>;

  beforeAll(async () => {
    mongo = await connectMongo({ url: testInfra().mongoUrl, appName: 'gateway-test' });
    identity = createIdentityStore(mongo.db(uniqueId('gw')));
    await identity.ensureIndexes();
    app = await buildServer({
      identity,
      logger: createLogger({ service: 'gateway', level: 'silent' }),
      bodyLimit: 1024 * 1024,
      ready: async () => true,
    });
  });
  afterAll(async () => {
    await app?.close();
    await mongo?.close();
  });

  it('answers health and readiness without credentials', async () => {
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    expect((await app.inject({ url: '/readyz' })).json()).toEqual({ status: 'ready' });
  });

  it('serves the OpenAPI document without credentials', async () => {
    const res = await app.inject({ url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ openapi: '3.1.0', info: { title: 'Threadwork API' } });
  });

  it.each([
    ['no header', undefined],
    ['another scheme', 'Basic dXNlcjpwYXNz'],
    ['a malformed key', 'Bearer nope'],
    ['an unknown key', `Bearer twk_${'A'.repeat(40)}`],
  ])('rejects %s with 401 {"error":"Unauthorized"}', async (_what, authorization) => {
    const res = await app.inject({ url: '/v1/work', headers: authorization ? { authorization } : {} });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });

  it('accepts a key it issued until the key is revoked', async () => {
    const user = await identity.ensureUser(uniqueId('alice'));
    const { id, key } = await identity.createKey(user._id);
    expect(isWellFormedKey(key)).toBe(true);

    const authed = await app.inject({ url: '/v1/no-such-route', headers: { authorization: `Bearer ${key}` } });
    // Past authentication: the route does not exist, which is a 404 in the contract's shape.
    expect(authed.statusCode).toBe(404);
    expect(authed.json()).toMatchObject({ error: { code: 'not_found' } });

    expect(await identity.revokeKey(id)).toBe(1);
    const revoked = await app.inject({ url: '/v1/no-such-route', headers: { authorization: `Bearer ${key}` } });
    expect(revoked.statusCode).toBe(401);
  });

  it('stores only a hash of the key', async () => {
    const user = await identity.ensureUser(uniqueId('bob'));
    const { key } = await identity.createKey(user._id);
    const [stored] = await identity.listKeys(user._id);
    expect(JSON.stringify(stored)).not.toContain(key);
    expect(stored?.prefix).toBe(keyPrefix(key));
    expect(stored?.hash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('does not confuse two keys sharing a prefix', async () => {
    const user = await identity.ensureUser(uniqueId('carol'));
    const { key } = await identity.createKey(user._id);
    const forged = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
    expect(await identity.authenticate(forged)).toBeNull();
    expect((await identity.authenticate(key))?._id).toBe(user._id);
  });

  it('converges concurrent creations of one user on one record', async () => {
    const login = uniqueId('dave');
    const users = await Promise.all(Array.from({ length: 8 }, () => identity.ensureUser(login)));
    expect(new Set(users.map((u) => u._id)).size).toBe(1);
  });
});
