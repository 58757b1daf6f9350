import { connectMongo, connectNats, createLogger, type MongoClient, type NatsConnection } from '@threadwork/platform';
import { testInfra, uniqueId } from '@threadwork/testing';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from './server.js';
import { createIdentityStore, type IdentityStore } from './store/identity.js';

// The gateway on a real NATS connection and a real identity store; none of these requests reaches
// a backing service or looks anyone up.
let nc: NatsConnection;
let mongo: MongoClient;
let identity: IdentityStore;
beforeAll(async () => {
  nc = await connectNats({
    servers: testInfra().natsUrl,
    name: 'gateway-server-test',
    logger: createLogger({ service: 'test', level: 'silent' }),
  });
  mongo = await connectMongo({ url: testInfra().mongoUrl, appName: 'gateway-server-test' });
  identity = createIdentityStore(mongo.db(uniqueId('gwserver')));
});
afterAll(async () => {
  await nc?.close();
  await mongo?.close();
});

/** A gateway whose log lines (at info) are kept; none of these requests reaches a backing service. */
async function gatewayWithLog() {
  const lines: { msg?: string; req?: { url?: string } }[] = [];
  const logger = createLogger({
    service: 'gateway-test',
    level: 'info',
    destination: { write: (line: string) => void lines.push(JSON.parse(line)) },
  });
  const app = await buildServer({
    identity,
    logger,
    bodyLimit: 1024 * 1024,
    ready: async () => true,
    nc,
    requestTimeoutMs: 1_000,
    rateLimit: { perSecond: 1_000, burst: 1_000 },
    sessionSecret: 'a-session-secret-of-at-least-32-characters',
  });
  return { app, lines };
}

describe('request log', () => {
  let close: () => Promise<void> = async () => {};
  afterEach(() => close());

  it('leaves probes out and logs every other request', async () => {
    const { app, lines } = await gatewayWithLog();
    close = () => app.close();

    for (const url of ['/healthz', '/readyz', '/healthz?from=probe']) {
      expect((await app.inject({ url })).statusCode).toBe(200);
    }
    expect(lines.filter((l) => l.msg === 'incoming request')).toEqual([]);

    expect((await app.inject({ url: '/no-such-route' })).statusCode).toBe(404);
    expect((await app.inject({ url: '/v1/work' })).statusCode).toBe(401);
    const logged = lines.filter((l) => l.msg === 'incoming request').map((l) => l.req?.url);
    expect(logged).toEqual(['/no-such-route', '/v1/work']);
    expect(lines.filter((l) => l.msg === 'request completed')).toHaveLength(2);
  });
});

describe('liveness over the network', () => {
  it('answers GET /healthz from the HTTP server and hands everything else to the routes', async () => {
    const { app, lines } = await gatewayWithLog();
    try {
      const base = await app.listen({ port: 0, host: '127.0.0.1' });
      const live = await fetch(`${base}/healthz`);
      expect(live.status).toBe(200);
      expect(live.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await live.json()).toEqual({ status: 'ok' });
      expect(lines.filter((l) => l.msg === 'incoming request')).toEqual([]);

      expect((await fetch(`${base}/readyz`)).status).toBe(200);
      const other = await fetch(`${base}/healthz/more`);
      expect(other.status).toBe(404);
      expect(await other.json()).toMatchObject({ error: { code: 'not_found' } });
    } finally {
      await app.close();
    }
  });
});
