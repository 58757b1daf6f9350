import { uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheAuthentication } from '../src/store/auth-cache.js';
import type { IdentityStore } from '../src/store/identity.js';
import { startHarness, type Harness } from './harness.js';

// A guesser presenting made-up keys must not turn the gateway into load on the database: each
// unknown key costs a lookup, so past a budget per client address the gateway answers 429 without
// one. Lookups are counted on the real store (FerretDB underneath), not on a stand-in.

const guess = () => `Bearer twk_${uniqueId('g').padEnd(40, 'x').slice(0, 40)}`;

/** The harness's real identity store, counting the lookups of presented keys. */
function counting(identity: IdentityStore): IdentityStore & { lookups: number } {
  const store = {
    ...identity,
    lookups: 0,
    async authenticate(key: string) {
      store.lookups++;
      return identity.authenticate(key);
    },
  };
  return store;
}

describe('unknown API keys, per client address', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness({ peers: 'none' });
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('answer 401 while the address has budget, then 429 with Retry-After and no lookup', async () => {
    const store = counting(harness.identity);
    const app = await harness.gateway({ identity: store, authFailureLimit: { perSecond: 0.01, burst: 3 } });
    const from = { remoteAddress: '203.0.113.10' };
    for (let i = 0; i < 3; i++) {
      const res = await app.inject({ url: '/v1/work', headers: { authorization: guess() }, ...from });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'Unauthorized' });
    }
    expect(store.lookups).toBe(3);
    for (let i = 0; i < 5; i++) {
      const res = await app.inject({ url: '/v1/work', headers: { authorization: guess() }, ...from });
      expect(res.statusCode).toBe(429);
      expect(res.json()).toMatchObject({ error: { code: 'rate_limited' } });
      expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    }
    expect(store.lookups).toBe(3);

    // Another address has its own budget.
    const other = await app.inject({
      url: '/v1/work',
      headers: { authorization: guess() },
      remoteAddress: '203.0.113.11',
    });
    expect(other.statusCode).toBe(401);
    expect(store.lookups).toBe(4);
    // A malformed key costs no lookup and is refused as before, whatever the budget.
    const malformed = await app.inject({ url: '/v1/work', headers: { authorization: 'Bearer twk_short' }, ...from });
    expect(malformed.statusCode).toBe(401);
    expect(store.lookups).toBe(4);
  });

  it('never counts keys that are known, and lets a key accepted moments ago through a limited address', async () => {
    const store = counting(harness.identity);
    const cached = cacheAuthentication(store, { ttlMs: 60_000, maxEntries: 100 });
    const app = await harness.gateway({ identity: cached, authFailureLimit: { perSecond: 0.01, burst: 2 } });
    const alice = await harness.caller();
    const from = { remoteAddress: '198.51.100.20' };
    // Valid keys, not remembered (a new store each time): looked up, never counted against the address.
    const uncachedApp = await harness.gateway({ identity: store, authFailureLimit: { perSecond: 0.01, burst: 2 } });
    for (let i = 0; i < 10; i++) {
      const res = await uncachedApp.inject({ url: '/v1/nothing-here', headers: alice.headers, ...from });
      expect(res.statusCode).toBe(404);
    }
    // Remembered by the caching gateway, then the address guesses its budget away.
    expect((await app.inject({ url: '/v1/nothing-here', headers: alice.headers, ...from })).statusCode).toBe(404);
    for (let i = 0; i < 2; i++) {
      expect((await app.inject({ url: '/v1/work', headers: { authorization: guess() }, ...from })).statusCode).toBe(
        401,
      );
    }
    const lookups = store.lookups;
    expect((await app.inject({ url: '/v1/work', headers: { authorization: guess() }, ...from })).statusCode).toBe(429);
    // Alice's remembered key needs no lookup and still works from there.
    expect((await app.inject({ url: '/v1/nothing-here', headers: alice.headers, ...from })).statusCode).toBe(404);
    expect(store.lookups).toBe(lookups);
  });

  it('takes the address from X-Forwarded-For only from a trusted proxy', async () => {
    const limit = { perSecond: 0.01, burst: 1 };
    // Not trusted (the default): a guesser that writes X-Forwarded-For itself is still one address.
    const direct = await harness.gateway({ authFailureLimit: limit });
    const spoofing = (n: number) => ({
      url: '/v1/work',
      remoteAddress: '192.0.2.50',
      headers: { authorization: guess(), 'x-forwarded-for': `203.0.113.${n}` },
    });
    expect((await direct.inject(spoofing(1))).statusCode).toBe(401);
    expect((await direct.inject(spoofing(2))).statusCode).toBe(429);

    // One trusted hop (a proxy that appends the client's address): each client is its own.
    const proxied = await harness.gateway({ authFailureLimit: limit, trustProxy: 1 });
    expect((await proxied.inject(spoofing(1))).statusCode).toBe(401);
    expect((await proxied.inject(spoofing(2))).statusCode).toBe(401);
    expect((await proxied.inject(spoofing(1))).statusCode).toBe(429);

    // Trusted by address: only the proxy at 192.0.2.50 may say who the client is.
    const byAddress = await harness.gateway({ authFailureLimit: limit, trustProxy: ['192.0.2.0/24'] });
    expect((await byAddress.inject(spoofing(3))).statusCode).toBe(401);
    expect((await byAddress.inject(spoofing(4))).statusCode).toBe(401);
    const elsewhere = { ...spoofing(5), remoteAddress: '198.51.100.99' };
    expect((await byAddress.inject(elsewhere)).statusCode).toBe(401);
    expect((await byAddress.inject({ ...spoofing(6), remoteAddress: '198.51.100.99' })).statusCode).toBe(429);
  });
});
