import {
  connectMongo,
  connectNats,
  createLogger,
  type Logger,
  type MongoClient,
  type NatsConnection,
  type RpcServer,
} from '@threadwork/platform';
import { isolatedNats, testInfra, uniqueId, type IsolatedNats } from '@threadwork/testing';
import { buildServer, type GatewayDeps } from '../src/server.js';
import { createIdentityStore, type IdentityStore, type UserDoc } from '../src/store/identity.js';
import { serveDoubles, World } from './doubles.js';

export const logger: Logger = createLogger({ service: 'gateway-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' });
export const SESSION_SECRET = 'test-session-secret-of-at-least-32-chars';
export const MIB = 1024 * 1024;

export type App = Awaited<ReturnType<typeof buildServer>>;

/** A caller with a key of its own. */
export interface Caller {
  user: UserDoc;
  key: string;
  headers: { authorization: string };
}

/**
 * One test file's gateway world: its own NATS server, the service doubles served on it, an
 * identity store in a database of its own, and a way to build gateways over them.
 */
export interface Harness {
  nats: IsolatedNats;
  nc: NatsConnection;
  mongo: MongoClient;
  identity: IdentityStore;
  world: World;
  app: App;
  caller(): Promise<Caller>;
  /** Another gateway over the same identity store, with some deps changed. */
  gateway(overrides?: Partial<GatewayDeps>): Promise<App>;
  close(): Promise<void>;
}

export async function startHarness(opts: { doubles?: boolean; deps?: Partial<GatewayDeps> } = {}): Promise<Harness> {
  const nats = await isolatedNats();
  const nc = await connectNats({ servers: nats.url, auth: nats.testAuth, name: 'gateway-test', logger });
  const mongo = await connectMongo({ url: testInfra().mongoUrl, appName: 'gateway-test' });
  const identity = createIdentityStore(mongo.db(uniqueId('gw')));
  await identity.ensureIndexes();
  const world = new World();
  const servers: RpcServer[] = opts.doubles === false ? [] : await serveDoubles(nc, world, logger);
  const apps: App[] = [];

  const gateway = async (overrides: Partial<GatewayDeps> = {}) => {
    const app = await buildServer({
      identity,
      logger,
      bodyLimit: MIB,
      ready: async () => true,
      nc,
      requestTimeoutMs: 1_000,
      rateLimit: { perSecond: 1_000, burst: 1_000 },
      sessionSecret: SESSION_SECRET,
      ...opts.deps,
      ...overrides,
    });
    apps.push(app);
    return app;
  };

  const app = await gateway();
  return {
    nats,
    nc,
    mongo,
    identity,
    world,
    app,
    gateway,
    async caller() {
      const user = await identity.ensureUser(uniqueId('user'));
      const { key } = await identity.createKey(user._id);
      return { user, key, headers: { authorization: `Bearer ${key}` } };
    },
    async close() {
      await Promise.all(apps.map((a) => a.close()));
      await Promise.all(servers.map((s) => s.stop(1_000)));
      await nc.drain();
      await mongo.close();
      await nats.stop();
    },
  };
}
