import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsIdentity } from '@threadwork/contracts';
import {
  loadConfig,
  mongoUrlWithDatabase,
  serviceDbName,
  type Logger,
  type StartedService,
} from '@threadwork/platform';
import { RepohostConfig, startRepohost } from '@threadwork/repohost';
import { RunsConfig, startRuns } from '@threadwork/runs';
import { ThreadsConfig, startThreads } from '@threadwork/threads';
import { baseServiceEnv, uniqueDbPrefix, type IsolatedNats } from '@threadwork/testing';

/** The services the gateway calls, started for one test file. */
export interface Peers {
  /** The local provider's folder of bare repositories (repohost lists what is in it). */
  reposDir: string;
  stop(): Promise<void>;
}

/**
 * The real runs, repohost and threads services on the file's NATS server and FerretDB, each as its
 * own NATS identity and with a database of its own, as in a deployment. Repohost serves the local
 * provider (bare repositories in a folder), so no GitHub is involved. The per-user limits are
 * raised out of the way: a file's tests make many threads for few users, and the limits have tests
 * of their own in the threads service.
 */
export async function startPeers(
  nats: IsolatedNats,
  extraEnv: Record<string, string> = {},
  /** Where repohost's log lines go (a test that reads them), instead of standard output. */
  repohostLogger?: Logger,
): Promise<Peers> {
  const dbPrefix = uniqueDbPrefix();
  const reposDir = mkdtempSync(join(tmpdir(), 'threadwork-gateway-repos-'));
  const env: Record<string, string> = {
    ...baseServiceEnv({ NATS_URL: nats.url }, dbPrefix),
    REPOHOST_LOCAL_DIR: reposDir,
    MAX_LIVE_RUNS_PER_USER: '1000',
    THREADS_PER_MINUTE_PER_USER: '100000',
    ...extraEnv,
  };
  const as = (identity: NatsIdentity) => ({
    ...env,
    ...nats.env(identity),
    MONGO_URL: mongoUrlWithDatabase(env.MONGO_URL!, serviceDbName(dbPrefix, identity)),
  });
  const started: StartedService[] = [];
  const stopAll = async () => {
    for (const service of started.reverse()) await service.stop();
    rmSync(reposDir, { recursive: true, force: true });
  };
  try {
    started.push(await startRuns(loadConfig(RunsConfig, as('runs'))));
    started.push(
      await startRepohost(loadConfig(RepohostConfig, as('repohost')), repohostLogger ? { logger: repohostLogger } : {}),
    );
    started.push(await startThreads(loadConfig(ThreadsConfig, as('threads'))));
  } catch (err) {
    await stopAll();
    throw err;
  }
  return { reposDir, stop: stopAll };
}
