import { describe, expect, it } from 'vitest';
import type { IdentityStore, UserDoc } from './identity.js';
import { cacheAuthentication } from './auth-cache.js';

const alice: UserDoc = { _id: 'usr_alice', login: 'alice', created_at: new Date(0) };
const KEY = `twk_${'a'.repeat(40)}`;

/** An identity store that knows the given keys and counts its lookups. */
function fakeStore(keys: Map<string, UserDoc>) {
  const calls = { authenticate: 0, revokeKey: 0 };
  const unused = () => Promise.reject(new Error('not used here'));
  const store: IdentityStore = {
    ensureIndexes: unused,
    ensureUser: unused,
    listUsers: unused,
    findUser: unused,
    createKey: unused,
    listKeys: unused,
    ping: unused,
    async authenticate(key) {
      calls.authenticate += 1;
      return keys.get(key) ?? null;
    },
    async revokeKey(idOrPrefix) {
      calls.revokeKey += 1;
      return keys.delete(idOrPrefix) ? 1 : 0;
    },
  };
  return { store, calls };
}

function setup(options: { ttlMs?: number; maxEntries?: number } = {}) {
  const keys = new Map([[KEY, alice]]);
  const { store, calls } = fakeStore(keys);
  const clock = { now: 1_000_000 };
  const cached = cacheAuthentication(store, {
    ttlMs: options.ttlMs ?? 10_000,
    maxEntries: options.maxEntries ?? 100,
    now: () => clock.now,
  });
  return { keys, calls, clock, cached };
}

describe('cacheAuthentication', () => {
  it('answers an accepted key from memory until the TTL has passed', async () => {
    const { calls, clock, cached } = setup({ ttlMs: 10_000 });
    expect(await cached.authenticate(KEY)).toEqual(alice);
    clock.now += 9_999;
    expect(await cached.authenticate(KEY)).toEqual(alice);
    expect(calls.authenticate).toBe(1);
    clock.now += 1;
    expect(await cached.authenticate(KEY)).toEqual(alice);
    expect(calls.authenticate).toBe(2);
  });

  it('looks up unknown keys every time, so a key created meanwhile works at once', async () => {
    const { keys, calls, cached } = setup();
    const other = `twk_${'b'.repeat(40)}`;
    expect(await cached.authenticate(other)).toBeNull();
    expect(await cached.authenticate(other)).toBeNull();
    expect(calls.authenticate).toBe(2);
    keys.set(other, alice);
    expect(await cached.authenticate(other)).toEqual(alice);
  });

  it('refuses a key revoked elsewhere once its entry has expired', async () => {
    const { keys, clock, cached } = setup({ ttlMs: 10_000 });
    expect(await cached.authenticate(KEY)).toEqual(alice);
    keys.delete(KEY);
    clock.now += 10_000;
    expect(await cached.authenticate(KEY)).toBeNull();
  });

  it('forgets everything on a revocation through it', async () => {
    const { calls, cached } = setup();
    expect(await cached.authenticate(KEY)).toEqual(alice);
    expect(await cached.revokeKey(KEY)).toBe(1);
    expect(await cached.authenticate(KEY)).toBeNull();
    expect(calls).toEqual({ authenticate: 2, revokeKey: 1 });
  });

  it('keeps at most maxEntries keys, forgetting the oldest first', async () => {
    const { keys, calls, clock, cached } = setup({ maxEntries: 2 });
    const [k1, k2, k3] = ['c', 'd', 'e'].map((c) => `twk_${c.repeat(40)}`) as [string, string, string];
    for (const key of [k1, k2, k3]) keys.set(key, alice);
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
    const { store } = fakeStore(new Map());
    const cached = cacheAuthentication(store, { ttlMs: 1, maxEntries: 1 });
    expect(cached.findUser).toBe(store.findUser);
    expect(cached.createKey).toBe(store.createKey);
  });
});
