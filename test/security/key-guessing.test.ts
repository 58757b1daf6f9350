import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIdentityStore, GatewayConfig, startGateway, type Gateway } from '@threadwork/gateway';
import { connectMongo, loadConfig, serviceDbName, type MongoClient } from '@threadwork/platform';
import {
  baseServiceEnv,
  isolatedNats,
  startFerretDb,
  uniqueDbPrefix,
  uniqueId,
  type IsolatedNats,
  type LocalServer,
} from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';

// Someone guessing API keys against the gateway. Every key that matches no one costs a database
// lookup, so a guesser could turn the gateway into load on the database; past a budget per client
// address the gateway answers 429 without one. Played against the real gateway process code
// (startGateway, its own configuration) on a FerretDB of this file's own, whose command counters
// then count exactly the gateway's lookups.

const ferretdbBin = inject('ferretdbBin');
const BURST = 5;

describe.skipIf(!ferretdbBin)('guessing API keys', () => {
  let dir: string;
  let ferret: LocalServer;
  let nats: IsolatedNats;
  let gateway: Gateway;
  let mongo: MongoClient;
  let aliceKey: string;
  let dbPrefix: string;

  /** `find` commands FerretDB has answered since it started: an API key lookup is one. */
  const finds = async () => {
    const status = (await mongo.db('admin').command({ serverStatus: 1 })) as {
      metrics: { commands: Record<string, { total: number } | undefined> };
    };
    return status.metrics.commands.find?.total ?? 0;
  };
  const guess = () => `twk_${uniqueId('guess').padEnd(40, 'Z').slice(0, 40)}`;
  const get = (key: string, headers: Record<string, string> = {}) =>
    // A route that does not exist: 404 once authenticated, so no backing service is needed.
    fetch(`${gateway.url}/v1/no-such-route`, { headers: { authorization: `Bearer ${key}`, ...headers } });

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'threadwork-key-guessing-'));
    ferret = await startFerretDb({ binary: ferretdbBin, dir });
    nats = await isolatedNats();
    dbPrefix = uniqueDbPrefix();
    const ownDb = serviceDbName(dbPrefix, 'gateway');
    gateway = await startGateway(
      loadConfig(GatewayConfig, {
        ...baseServiceEnv({ NATS_URL: nats.url }, dbPrefix),
        ...nats.env('gateway'),
        // The gateway's connection string names its own database, as each service's does in a deployment.
        MONGO_URL: `${ferret.url.replace(/\/$/, '')}/${ownDb}`,
        PORT: '0',
        HOST: '127.0.0.1',
        AUTH_FAILURES_BURST: String(BURST),
        AUTH_FAILURES_PER_SECOND: '0.001',
      }),
    );
    mongo = await connectMongo({ url: ferret.url, appName: 'key-guessing-test' });
    const identity = createIdentityStore(mongo.db(ownDb));
    const alice = await identity.ensureUser('alice');
    aliceKey = (await identity.createKey(alice._id)).key;
  });

  afterAll(async () => {
    await mongo?.close();
    await gateway?.stop();
    await nats?.stop();
    await ferret?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('never holds up good keys, however many arrive at once from one address before any is remembered', async () => {
    // An office behind one NAT, or a client that has just started: many more keys than the budget,
    // none remembered yet, all looked up at once. Only keys that match no one count against it.
    const identity = createIdentityStore(mongo.db(serviceDbName(dbPrefix, 'gateway')));
    const user = await identity.ensureUser('office');
    const keys = await Promise.all(
      Array.from({ length: BURST * 8 }, async () => (await identity.createKey(user._id)).key),
    );
    const statuses = await Promise.all(keys.map(async (key) => (await get(key)).status));
    expect(statuses.filter((status) => status !== 404)).toEqual([]);
  });

  it('costs one lookup per unknown key up to the budget, then 429 with Retry-After and none', async () => {
    // Alice's key, accepted once, is remembered by this gateway.
    expect((await get(aliceKey)).status).toBe(404);

    const before = await finds();
    for (let i = 0; i < BURST; i++) {
      const res = await get(guess());
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: 'Unauthorized' });
    }
    expect((await finds()) - before).toBe(BURST);

    const limited = await finds();
    for (let i = 0; i < 3 * BURST; i++) {
      const res = await get(guess());
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(await res.json()).toMatchObject({ error: { code: 'rate_limited' } });
    }
    // Nor does writing another client address into X-Forwarded-For help: no proxy is trusted here.
    for (let i = 0; i < BURST; i++) {
      const res = await get(guess(), { 'x-forwarded-for': `203.0.113.${i + 1}` });
      expect(res.status).toBe(429);
    }
    expect(await finds()).toBe(limited);

    // The key accepted before still works from the limited address, without a lookup.
    expect((await get(aliceKey)).status).toBe(404);
    expect(await finds()).toBe(limited);
  });
});
