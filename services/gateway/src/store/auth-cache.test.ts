import { connectMongo, type MongoClient } from '@threadwork/platform';
import { testInfra, uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createIdentityStore, type IdentityStore, type UserDoc } from './identity.js';
import { cacheAuthentication } from './auth-cache.js';

// The cache in front of the real identity store on the test database, each lookup that reaches the
// store counted; the cache's clock is the test's.

let mongo: MongoClient;
beforeAll(async () => {
  mongo = await connectMongo({ url: testInfra().mongoUrl, appName: 'auth-cache-test' });
});
afterAll(async () => {
  await mongo?.close();
});

/** The real store of a database of the test's own, its `authenticate` and `revokeKey` counted. */
async function countedStore() {
  const store = createIdentityStore(mongo.db(uniqueId('authcache')));
  await store.ensureIndexes();
  const calls = { authenticate: 0, revokeKey: 0 };
  const counted: IdentityStore = {
    ...store,
    authenticate(key) {
      calls.authenticate += 1;
      return store.authenticate(key);
    },
    revokeKey(idOrPrefix) {
      calls.revokeKey += 1;
      return store.revokeKey(idOrPrefix);
    },
  };
  return { store, counted, calls };
}

async function setup(options: { ttlMs?: number; maxEntries?: number } = {}) {
  const { store, counted, calls } = await countedStore();
  const alice: UserDoc = await store.ensureUser('alice');
  const { key: KEY, prefix } = await store.createKey(alice._id);
  const clock = { now: 1_000_000 };
  const cached = cacheAuthentication(counted, {
    ttlMs: options.ttlMs ?? 10_000,
    maxEntries: options.maxEntries ?? 100,
    now: () => clock.now,
  });
  /** A new key of alice's, made in the store behind the cache's back. */
  const newKey = async () => (await store.createKey(alice._id)).key;
  return { store, alice, KEY, prefix, newKey, calls, clock, cached };
}

describe('cacheAuthentication', () => {
  it('answers an accepted key from memory until the TTL has passed', async () => {
    const { alice, KEY, calls, clock, cached } = await setup({ ttlMs: 10_000 });
    expect(await cached.authenticate(KEY)).toEqual(alice);
    clock.now += 9_999;
    expect(await cached.authenticate(KEY)).toEqual(alice);
    expect(calls.authenticate).toBe(1);
    clock.now += 1;
    expect(await cached.authenticate(KEY)).toEqual(alice);
    expect(calls.authenticate).toBe(2);
  });

  it('looks up unknown keys every time, so a key created meanwhile works at once', async () => {
    const { alice, newKey, calls, cached } = await setup();
    const unknown = `twk_${'b'.repeat(40)}`;
    expect(await cached.authenticate(unknown)).toBeNull();
    expect(await cached.authenticate(unknown)).toBeNull();
    expect(calls.authenticate).toBe(2);
    const created = await newKey();
    expect(await cached.authenticate(created)).toEqual(alice);
  });

  it('refuses a key revoked elsewhere once its entry has expired', async () => {
    const { store, alice, KEY, prefix, clock, cached } = await setup({ ttlMs: 10_000 });
    expect(await cached.authenticate(KEY)).toEqual(alice);
    expect(await store.revokeKey(prefix)).toBe(1);
    clock.now += 10_000;
    expect(await cached.authenticate(KEY)).toBeNull();
  });

  it('forgets everything on a revocation through it', async () => {
    const { alice, KEY, prefix, calls, cached } = await setup();
    expect(await cached.authenticate(KEY)).toEqual(alice);
    expect(await cached.revokeKey(prefix)).toBe(1);
    expect(await cached.authenticate(KEY)).toBeNull();
    expect(calls).toEqual({ authenticate: 2, revokeKey: 1 });
  });

  it('keeps at most maxEntries keys, forgetting the oldest first', async () => {
    const { newKey, calls, clock, cached } = await setup({ maxEntries: 2 });
    const [k1, k2, k3] = [await newKey(), await newKey(), await newKey()];
    for (const key of [k1, k2, k3]) {
      await cached.authenticate(key);
      clock.now += 1;
    }
    expect(calls.authenticate).toBe(3);
    // k2 and k3 are remembered; k1 was forgotten to make room for k3.
    await cached.authenticate(k2);
    await cached.authenticate(k3);
    expect(calls.authenticate).toBe(3);
    await cached.authenticate(k1);
    expect(calls.authenticate).toBe(4);
  });

  it('passes every other operation through unchanged', async () => {
    const { store } = await countedStore();
    const cached = cacheAuthentication(store, { ttlMs: 1, maxEntries: 1 });
    expect(cached.findUser).toBe(store.findUser);
    expect(cached.createKey).toBe(store.createKey);
  });
});
