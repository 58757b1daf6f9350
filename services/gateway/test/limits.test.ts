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

describe('backing services down', () => {
  let harness: Harness;

  beforeAll(async () => {
    // Nothing answers on this NATS server.
    harness = await startHarness({ doubles: false, deps: { requestTimeoutMs: 300 } });
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
