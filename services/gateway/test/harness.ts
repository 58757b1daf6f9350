import { rpc, type CreateThreadBody, type Run, type RunStatus } from '@threadwork/contracts';
import {
  connectMongo,
  connectNats,
  createLogger,
  request,
  type Logger,
  type MongoClient,
  type NatsConnection,
  type RpcServer,
} from '@threadwork/platform';
import { localRepositoryId } from '@threadwork/repohost';
import { createBareRepo, isolatedNats, RunDriver, testInfra, uniqueId, type IsolatedNats } from '@threadwork/testing';
import { buildServer, type GatewayDeps } from '../src/server.js';
import { createIdentityStore, type IdentityStore, type UserDoc } from '../src/store/identity.js';
import { serveFaultyPeers } from './faulty-peers.js';
import { startPeers, type Peers } from './peers.js';
import { tapRequests, type RequestTap } from './tap.js';

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

/** A run of a thread of its own, with the driver that moved it (null while it is queued or once cancelled). */
export interface DrivenRun {
  threadId: string;
  run: Run;
  driver: RunDriver | null;
}

/** Where `Harness.run` takes a new run. */
export type DrivableStatus = Extract<RunStatus, 'queued' | 'running' | 'completed' | 'failed' | 'cancelled'>;

export interface HarnessOptions {
  /**
   * What answers the gateway's requests: the real threads, runs and repohost services (the
   * default), stand-ins of threads and runs that fail (faulty-peers.ts), or nothing at all.
   */
  peers?: 'real' | 'faulty' | 'none';
  /** Bare repositories repohost lists from the start; threads are made in the first. */
  repositories?: string[];
  deps?: Partial<GatewayDeps>;
  /** Environment of the real services beyond the defaults (the harness catalog, say). */
  peerEnv?: Record<string, string>;
  /** Where the real repohost logs, for a test that reads its lines. */
  repohostLogger?: Logger;
}

/**
 * One test file's gateway world: its own NATS server, the services the gateway calls served on
 * it, an identity store in a database of its own, and a way to build gateways over them. Tests
 * make their data through the real services (each thread and run new), and see what the gateway
 * sends them through taps beside them.
 */
export interface Harness {
  nats: IsolatedNats;
  nc: NatsConnection;
  mongo: MongoClient;
  identity: IdentityStore;
  /** The database of `identity` (users, API keys, login links), to look at what is stored. */
  identityDbName: string;
  app: App;
  /** The ids of the repositories made at the start, by name. */
  repositories: Map<string, number>;
  /** Every runs.eventsPage request the gateway sends (by `run_id`). */
  pages: RequestTap;
  /** Every threads.create request the gateway sends, with the request id it carries. */
  creates: RequestTap;
  caller(): Promise<Caller>;
  /** A new thread of the owner in the first repository; its first run is queued. */
  thread(ownerId: string, body?: Partial<CreateThreadBody>): Promise<{ threadId: string; runId: string }>;
  /** A new thread's first run, moved to `status` the way a runner (or, for `cancelled`, its owner) does. */
  run(ownerId: string, status?: DrivableStatus): Promise<DrivenRun>;
  /** A new thread whose first run has completed: nothing is live on it. */
  idleThread(ownerId: string): Promise<string>;
  /** Another gateway over the same identity store, with some deps changed. */
  gateway(overrides?: Partial<GatewayDeps>): Promise<App>;
  close(): Promise<void>;
}

export async function startHarness(opts: HarnessOptions = {}): Promise<Harness> {
  const nats = await isolatedNats();
  const nc = await connectNats({ servers: nats.url, auth: nats.testAuth, name: 'gateway-test', logger });
  const mongo = await connectMongo({ url: testInfra().mongoUrl, appName: 'gateway-test' });
  const identityDbName = uniqueId('gw');
  const identity = createIdentityStore(mongo.db(identityDbName));
  await identity.ensureIndexes();
  const kind = opts.peers ?? 'real';
  const peers: Peers | null = kind === 'real' ? await startPeers(nats, opts.peerEnv, opts.repohostLogger) : null;
  const faulty: RpcServer[] = kind === 'faulty' ? await serveFaultyPeers(nc, logger) : [];
  const repositories = new Map<string, number>();
  for (const name of opts.repositories ?? ['app']) {
    if (!peers) break;
    createBareRepo(peers.reposDir, name);
    repositories.set(name, localRepositoryId(name));
  }
  const pages = tapRequests(nc, rpc.runs.eventsPage);
  const creates = tapRequests(nc, rpc.threads.create);
  await nc.flush();
  const apps: App[] = [];

  const gateway = async (overrides: Partial<GatewayDeps> = {}) => {
    const app = await buildServer({
      identity,
      logger,
      bodyLimit: MIB,
      ready: async () => true,
      nc,
      // The gateway's default: the real services answer a busy two-core machine in their own time.
      requestTimeoutMs: 5_000,
      rateLimit: { perSecond: 1_000, burst: 1_000 },
      sessionSecret: SESSION_SECRET,
      ...opts.deps,
      ...overrides,
    });
    apps.push(app);
    return app;
  };

  const thread: Harness['thread'] = async (ownerId, body = {}) => {
    const [repositoryId] = repositories.values();
    if (repositoryId === undefined) throw new Error('this harness has no repositories');
    const created = await request(nc, rpc.threads.create, {
      owner_id: ownerId,
      view: 'thread',
      body: { repository_id: repositoryId, prompt: 'hello', ...body },
    });
    return { threadId: created.id, runId: created.run_id };
  };

  const run: Harness['run'] = async (ownerId, status = 'running') => {
    const { threadId, runId } = await thread(ownerId);
    const current = () => request(nc, rpc.runs.get, { owner_id: ownerId, run_id: runId });
    switch (status) {
      case 'queued':
        return { threadId, run: await current(), driver: null };
      case 'cancelled': {
        const { run: cancelled } = await request(nc, rpc.runs.cancel, { owner_id: ownerId, run_id: runId });
        return { threadId, run: cancelled, driver: null };
      }
      case 'running':
        return { threadId, driver: await (await RunDriver.claim(nc, runId)).start(), run: await current() };
      case 'completed':
      case 'failed': {
        const driver = await (await RunDriver.claim(nc, runId)).start();
        const error = status === 'failed' ? { error: { code: 'harness_error', message: 'the harness failed' } } : {};
        return { threadId, run: await driver.to(status, error), driver };
      }
    }
  };

  const app = await gateway();
  return {
    nats,
    nc,
    mongo,
    identity,
    identityDbName,
    app,
    repositories,
    pages,
    creates,
    gateway,
    thread,
    run,
    async idleThread(ownerId) {
      return (await run(ownerId, 'completed')).threadId;
    },
    async caller() {
      const user = await identity.ensureUser(uniqueId('user'));
      const { key } = await identity.createKey(user._id);
      return { user, key, headers: { authorization: `Bearer ${key}` } };
    },
    async close() {
      await Promise.all(apps.map((a) => a.close()));
      pages.close();
      creates.close();
      await Promise.all(faulty.map((s) => s.stop(1_000)));
      await nc.drain();
      await peers?.stop();
      await mongo.close();
      await nats.stop();
    },
  };
}
