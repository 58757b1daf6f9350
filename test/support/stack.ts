import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsIdentity } from '@threadwork/contracts';
import { createIdentityStore, GatewayConfig, startGateway } from '@threadwork/gateway';
import {
  connectMongo,
  connectNats,
  createLogger,
  loadConfig,
  mongoUrlWithDatabase,
  serviceDbName,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import { RepohostConfig, startRepohost } from '@threadwork/repohost';
import { ReviewConfig, startReview } from '@threadwork/review';
import { RunsConfig, startRuns } from '@threadwork/runs';
import { ThreadsConfig, startThreads } from '@threadwork/threads';
import { baseServiceEnv, createBareRepo, isolatedNats, uniqueDbPrefix, type IsolatedNats } from '@threadwork/testing';

export interface TestUser {
  id: string;
  login: string;
  key: string;
  /** Headers for an authenticated JSON request. */
  headers: Record<string, string>;
}

export interface Stack {
  baseUrl: string;
  nats: IsolatedNats;
  /** A client connection for tests that act as the runner or watch subjects. */
  nc: NatsConnection;
  reposDir: string;
  env: Record<string, string>;
  createUser(login?: string): Promise<TestUser>;
  /** A bare repository in the local provider's folder; returns its repository_id as listed. */
  addRepo(name: string, opts?: Parameters<typeof createBareRepo>[2]): Promise<number>;
  fetch(path: string, init?: RequestInit & { user?: TestUser }): Promise<Response>;
  stop(): Promise<void>;
}

/**
 * Every service of the API in this process, on a NATS server of this test file and FerretDB,
 * with the gateway listening on a real port: end-to-end tests speak HTTP to it only (plus the
 * runs service's internal API where they stand in for the runner).
 */
export async function startStack(extraEnv: Record<string, string> = {}): Promise<Stack> {
  const nats = await isolatedNats();
  const dbPrefix = uniqueDbPrefix();
  const reposDir = mkdtempSync(join(tmpdir(), 'threadwork-repos-'));
  const env: Record<string, string> = {
    ...baseServiceEnv({ NATS_URL: nats.url }, dbPrefix),
    REPOHOST_LOCAL_DIR: reposDir,
    PORT: '0',
    HOST: '127.0.0.1',
    ...extraEnv,
  };
  const started: StartedService[] = [];
  const stopAll = async () => {
    for (const service of started.reverse()) await service.stop();
  };
  try {
    // Each service as its own NATS identity, and with a connection string naming its own
    // database (which it checks), as in a deployment.
    const as = (identity: NatsIdentity) => ({
      ...env,
      ...nats.env(identity),
      MONGO_URL: mongoUrlWithDatabase(env.MONGO_URL!, serviceDbName(dbPrefix, identity)),
    });
    started.push(await startRuns(loadConfig(RunsConfig, as('runs'))));
    started.push(await startRepohost(loadConfig(RepohostConfig, as('repohost'))));
    started.push(await startReview(loadConfig(ReviewConfig, as('review'))));
    started.push(await startThreads(loadConfig(ThreadsConfig, as('threads'))));
    const gateway = await startGateway(loadConfig(GatewayConfig, as('gateway')));
    started.push(gateway);

    const nc = await connectNats({
      servers: nats.url,
      auth: nats.testAuth,
      name: 'e2e-test',
      logger: createLogger({ service: 'e2e', level: 'silent' }),
    });
    const mongo = await connectMongo({ url: env.MONGO_URL!, appName: 'e2e-test' });
    const identity = createIdentityStore(mongo.db(serviceDbName(dbPrefix, 'gateway')));
    const baseUrl = gateway.url;

    const stack: Stack = {
      baseUrl,
      nats,
      nc,
      reposDir,
      env,
      async createUser(login = `user${Math.random().toString(36).slice(2, 10)}`) {
        const user = await identity.ensureUser(login);
        const { key } = await identity.createKey(user._id);
        return {
          id: user._id,
          login,
          key,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        };
      },
      async addRepo(name, opts) {
        createBareRepo(reposDir, name, opts);
        const anyUser = await stack.createUser();
        const res = await stack.fetch(`/v1/repohost/repositories?q=${encodeURIComponent(name)}`, { user: anyUser });
        const body = (await res.json()) as { repositories: { repository_id: number; name: string }[] };
        const repo = body.repositories.find((r) => r.name === name);
        if (!repo) throw new Error(`repository ${name} is not listed: ${JSON.stringify(body)}`);
        return repo.repository_id;
      },
      fetch(path, init = {}) {
        const { user, headers, ...rest } = init;
        return fetch(`${baseUrl}${path}`, {
          ...rest,
          headers: { ...(user?.headers ?? {}), ...(headers as Record<string, string> | undefined) },
        });
      },
      async stop() {
        await nc.drain();
        await mongo.close();
        await stopAll();
        await nats.stop();
        rmSync(reposDir, { recursive: true, force: true });
      },
    };
    return stack;
  } catch (err) {
    await stopAll();
    await nats.stop();
    rmSync(reposDir, { recursive: true, force: true });
    throw err;
  }
}
