import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.js';

describe('rate limit', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness();
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('answers 429 with Retry-After once a caller has spent its bucket, per caller', async () => {
    const app = await harness.gateway({ rateLimit: { perSecond: 0.5, burst: 2 } });
    const alice = await harness.caller();
    const bob = await harness.caller();
    const work = (headers: Record<string, string>) => app.inject({ url: '/v1/work', headers });

    expect((await work(alice.headers)).statusCode).toBe(200);
    expect((await work(alice.headers)).statusCode).toBe(200);
    const limited = await work(alice.headers);
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ error: { code: 'rate_limited' } });
    // One token takes 2 s at 0.5 per second.
    expect(limited.headers['retry-after']).toBe('2');

    // Another caller has a bucket of its own; anonymous requests are 401 before any bucket.
    expect((await work(bob.headers)).statusCode).toBe(200);
    expect((await app.inject({ url: '/v1/work' })).statusCode).toBe(401);
    // Public documents are not limited.
    expect((await app.inject({ url: '/v1/openapi.json', headers: alice.headers })).statusCode).toBe(200);
  });
});

describe('rate limit of the public paths, per client address', () => {
  let harness: Harness;

  beforeAll(async () => {
    // Limited or refused by the gateway itself: nothing here reaches a service.
    harness = await startHarness({ peers: 'none' });
  });
  afterAll(async () => {
    await harness?.close();
  });

  const limit = { perSecond: 0.001, burst: 2 };
  /** A webhook with no signature: refused (401) by the gateway itself, after the limit. */
  const unsigned = (app: Awaited<ReturnType<Harness['gateway']>>, remoteAddress: string, forwardedFor?: string) =>
    app.inject({
      method: 'POST',
      url: '/v1/repohost/webhooks',
      remoteAddress,
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'ping',
        'x-github-delivery': 'd-1',
        ...(forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor }),
      },
      payload: '{}',
    });

  it('keys on the peer address, whatever X-Forwarded-For says, when no proxy is trusted', async () => {
    const app = await harness.gateway({ publicRateLimit: limit, webhookSecret: 'secret' });
    expect((await unsigned(app, '198.51.100.1', '203.0.113.1')).statusCode).toBe(401);
    expect((await unsigned(app, '198.51.100.1', '203.0.113.2')).statusCode).toBe(401);
    const limited = await unsigned(app, '198.51.100.1', '203.0.113.3');
    expect(limited.statusCode).toBe(429);
    expect(limited.json()).toMatchObject({ error: { code: 'rate_limited' } });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another address, and the setup callback shares the address's bucket.
    expect((await unsigned(app, '198.51.100.2')).statusCode).toBe(401);
    expect((await app.inject({ url: '/v1/repohost/setup?state=s', remoteAddress: '198.51.100.1' })).statusCode).toBe(
      429,
    );
    // Another spelling of a limited path routes to the same handler, and takes from the same bucket.
    expect((await app.inject({ url: '/%761/repohost/setup?state=s', remoteAddress: '198.51.100.1' })).statusCode).toBe(
      429,
    );
  });

  it('keys on the client a trusted proxy names, and on the peer when an untrusted one names any', async () => {
    const app = await harness.gateway({ publicRateLimit: limit, webhookSecret: 'secret', trustProxy: ['10.0.0.0/8'] });
    for (const client of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) {
      expect((await unsigned(app, '10.1.2.3', client)).statusCode).toBe(401);
    }
    expect((await unsigned(app, '10.1.2.3', '203.0.113.1')).statusCode).toBe(401);
    expect((await unsigned(app, '10.1.2.3', '203.0.113.1')).statusCode).toBe(429);
    // Not a trusted proxy: its X-Forwarded-For is ignored and the peer spends its own bucket.
    expect((await unsigned(app, '192.0.2.9', '203.0.113.50')).statusCode).toBe(401);
    expect((await unsigned(app, '192.0.2.9', '203.0.113.51')).statusCode).toBe(401);
    expect((await unsigned(app, '192.0.2.9', '203.0.113.52')).statusCode).toBe(429);
    // IPv6 clients count per /64.
    expect((await unsigned(app, '10.1.2.3', '2001:db8:0:1::a')).statusCode).toBe(401);
    expect((await unsigned(app, '10.1.2.3', '2001:db8:0:1::b')).statusCode).toBe(401);
    expect((await unsigned(app, '10.1.2.3', '2001:db8:0:1::c')).statusCode).toBe(429);
  });

  it('refuses every delivery when no webhook secret is configured', async () => {
    const app = await harness.gateway({ webhookSecret: null });
    const res = await app.inject({
      method: 'POST',
      url: '/v1/repohost/webhooks',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'ping',
        'x-github-delivery': 'd-2',
        'x-hub-signature-256': `sha256=${'0'.repeat(64)}`,
      },
      payload: '{}',
    });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: 'Unauthorized' });
  });
});

describe('backing services down', () => {
  let harness: Harness;

  beforeAll(async () => {
    // Nothing answers on this NATS server.
    harness = await startHarness({ peers: 'none', deps: { requestTimeoutMs: 300 } });
  });
  afterAll(async () => {
    await harness?.close();
  });

  it.each([
    ['GET', '/v1/work'],
    ['GET', '/v1/repohost/repositories'],
    ['GET', '/v1/runs/run_1'],
    ['GET', '/v1/runs/run_1/events?wait=5'],
    ['GET', '/v1/runs/run_1/events/stream'],
    ['POST', '/v1/runs/run_1/cancel'],
  ] as const)('%s %s answers 503 unavailable with Retry-After', async (method, url) => {
    const alice = await harness.caller();
    // A request that waited for the silent service would never answer: this test's timeout guards it.
    const res = await harness.app.inject({ method, url, headers: alice.headers });
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({ error: { code: 'unavailable' } });
    expect(res.headers['retry-after']).toBe('1');
  });
});
