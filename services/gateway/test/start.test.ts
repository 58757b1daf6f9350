import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectMongo, createLogger, loadConfig, serviceDbName, type MongoClient } from '@threadwork/platform';
import { baseServiceEnv, startNatsServer, testInfra, testNatsAuth, type LocalServer } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { GatewayConfig, sessionSecretOf, startGateway, type Gateway } from '../src/index.js';
import { createIdentityStore, type IdentityStore } from '../src/store/identity.js';
import { signSession } from '../src/domain/session.js';
import { startHarness, type Harness } from './harness.js';

// The gateway as `main` starts it: config from the environment, its own NATS connection and
// database, listening on a port; the real services answer on the same NATS server.

describe('startGateway', () => {
  let harness: Harness;
  let gateway: Gateway;
  let mongo: MongoClient;
  let identity: IdentityStore;
  const secret = 'start-test-session-secret-0123456789';

  beforeAll(async () => {
    harness = await startHarness();
    const env = baseServiceEnv(harness.nats.env('gateway'));
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
    await harness.thread(user._id);

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

// Needs a nats-server binary of its own to kill and restart (absent when the suite runs on given servers).
describe.skipIf(!inject('natsServerBin'))('readiness follows NATS', () => {
  let dir: string;
  let nats: LocalServer;
  const auth = testNatsAuth();
  let gateway: Gateway;

  /** /readyz's status once it settles on `status` (each probe is bounded; this only repeats it). */
  async function readyzBecomes(status: number): Promise<void> {
    await vi.waitFor(
      async () =>
        expect((await fetch(`${gateway.url}/readyz`, { signal: AbortSignal.timeout(10_000) })).status).toBe(status),
      { timeout: 30_000, interval: 100 },
    );
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'threadwork-readyz-'));
    nats = await startNatsServer({ binary: inject('natsServerBin')!, dir, config: auth.config });
    gateway = await startGateway(
      loadConfig(GatewayConfig, {
        ...baseServiceEnv({ NATS_URL: nats.url, NATS_NKEY_SEED: auth.keys.gateway.seed }),
        PORT: '0',
        HOST: '127.0.0.1',
      }),
    );
  });
  afterAll(async () => {
    await gateway?.stop();
    await nats?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('goes not ready while NATS is down or frozen, and ready again when it is back', async () => {
    await readyzBecomes(200);

    await nats.stop('SIGKILL');
    await readyzBecomes(503);
    nats = await startNatsServer({ binary: inject('natsServerBin')!, dir, port: nats.port, config: auth.config });
    await readyzBecomes(200);

    // Connected but not answering: the probe must not hang on it.
    process.kill(nats.pid, 'SIGSTOP');
    try {
      await readyzBecomes(503);
    } finally {
      process.kill(nats.pid, 'SIGCONT');
    }
    await readyzBecomes(200);
  });
});
