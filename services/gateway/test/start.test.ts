import { connectMongo, createLogger, loadConfig, serviceDbName, type MongoClient } from '@threadwork/platform';
import { baseServiceEnv, testInfra } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayConfig, sessionSecretOf, startGateway, type Gateway } from '../src/index.js';
import { createIdentityStore, type IdentityStore } from '../src/store/identity.js';
import { signSession } from '../src/domain/session.js';
import { startHarness, type Harness } from './harness.js';

// The gateway as `main` starts it: config from the environment, its own NATS connection and
// database, listening on a port; the service doubles answer on the same NATS server.

describe('startGateway', () => {
  let harness: Harness;
  let gateway: Gateway;
  let mongo: MongoClient;
  let identity: IdentityStore;
  const secret = 'start-test-session-secret-0123456789';

  beforeAll(async () => {
    harness = await startHarness();
    const env = baseServiceEnv(harness.nats.url);
    gateway = await startGateway(
      loadConfig(GatewayConfig, { ...env, PORT: '0', HOST: '127.0.0.1', SESSION_SECRET: secret }),
    );
    mongo = await connectMongo({ url: testInfra().mongoUrl, appName: 'gateway-start-test' });
    identity = createIdentityStore(mongo.db(serviceDbName(env.MONGO_DB_PREFIX!, 'gateway')));
  });
  afterAll(async () => {
    await gateway?.stop();
    await mongo?.close();
    await harness?.close();
  });

  it('serves health, and routes to the services with a key or a session from SESSION_SECRET', async () => {
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);
    const user = await identity.ensureUser('start-test-user');
    const { key } = await identity.createKey(user._id);
    harness.world.addThread(user._id);

    const withKey = await fetch(`${gateway.url}/v1/work`, { headers: { authorization: `Bearer ${key}` } });
    expect(withKey.status).toBe(200);
    expect(((await withKey.json()) as { projects: unknown[] }).projects).toHaveLength(1);

    const session = signSession(user._id, Math.floor(Date.now() / 1000) + 60, secret);
    const withCookie = await fetch(`${gateway.url}/v1/work`, { headers: { cookie: `tw_session=${session}` } });
    expect(withCookie.status).toBe(200);
  });

  it('warns and makes a secret of its own when none is configured', async () => {
    const lines: string[] = [];
    const logger = createLogger({
      service: 'gateway',
      level: 'warn',
      destination: { write: (l: string) => lines.push(l) },
    });
    const config = loadConfig(GatewayConfig, {});
    const a = sessionSecretOf(config, logger);
    expect(a.length).toBeGreaterThanOrEqual(32);
    expect(sessionSecretOf(config, logger)).not.toBe(a);
    expect(lines.join('')).toContain('SESSION_SECRET is not set');
  });
});
