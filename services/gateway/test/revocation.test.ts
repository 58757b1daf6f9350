import { connectNats, natsAuthWithSeed } from '@threadwork/platform';
import { waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTH_CACHE_DEFAULTS, cacheAuthentication } from '../src/store/auth-cache.js';
import { announceRevocation, forgetOnRevocation } from '../src/store/revocations.js';
import { logger, startHarness, type Harness } from './harness.js';

// A key revoked by the admin CLI (another process, writing the database) must stop working at once
// on every gateway replica, also on one that remembers it (AUTH_CACHE_TTL_MS): the CLI announces
// the revocation on NATS, and each replica forgets the keys it remembers.

let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h?.close();
});

describe('a revoked key', () => {
  it('is refused at once by a replica that remembered it, once the revocation is announced', async () => {
    // Remembered far longer than the test runs: only the announcement can make it forget.
    const cached = cacheAuthentication(h.identity, { ...AUTH_CACHE_DEFAULTS, ttlMs: 10 * 60_000 });
    forgetOnRevocation(h.nc, cached, logger);
    const gateway = await h.gateway({ identity: cached });
    const caller = await h.caller();
    const work = () => gateway.inject({ url: '/v1/work', headers: caller.headers });
    expect((await work()).statusCode).toBe(200);

    // The admin CLI's side: the database first (the replica does not see it, and still lets the key in)…
    const [key] = await h.identity.listKeys(caller.user._id);
    expect(await h.identity.revokeKey(key!._id)).toBe(1);
    expect((await work()).statusCode).toBe(200);
    // …then the announcement, from a connection of its own.
    const admin = await connectNats({
      servers: h.nats.url,
      auth: h.nats.keys && natsAuthWithSeed(h.nats.keys.admin.seed, 'admin'),
      name: 'admin',
      logger,
      giveUpAfterMs: 3_000,
    });
    await announceRevocation(admin);
    await admin.close();
    const status = await waitFor(
      'the revoked key to be refused',
      async () => {
        const { statusCode } = await work();
        return statusCode === 401 ? statusCode : undefined;
      },
      30_000,
      { intervalMs: 20 },
    );
    expect(status).toBe(401);
  });
});
