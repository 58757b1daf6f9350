import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rpc, type AdmitRequest, type RpcEndpoint } from '@threadwork/contracts';
import {
  AppError,
  connectNats,
  createLogger,
  jetStreamOf,
  loadConfig,
  request,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import { localRepositoryId, RepohostConfig, startRepohost } from '@threadwork/repohost';
import { RunsConfig, startRuns } from '@threadwork/runs';
import {
  baseServiceEnv,
  createBareRepo,
  isolatedNats,
  newClaimId,
  RunDriver,
  uniqueDbPrefix,
  uniqueId,
  type IsolatedNats,
} from '@threadwork/testing';
import { afterAll, beforeAll } from 'vitest';
import type { z } from 'zod';
import { KNOWN_REPOSITORIES, serveRepohostDouble, serveRunsDouble } from './doubles.js';

/** What a case may do to a run besides calling the endpoints: what a runner does to the real one. */
interface RunsSide {
  nc: NatsConnection;
  /** Claims the run as its runner does; the claim id is the holder's proof. */
  claim(runId: string): Promise<string>;
  /** Attests a runner's event about the run under its claim. */
  attest(runId: string, subject: string, digest: string): Promise<void>;
  /** Ends a claimed run as its runner does. */
  end(runId: string, status: 'completed' | 'failed'): Promise<void>;
}

interface RepohostSide {
  nc: NatsConnection;
  /** An owner who sees the two repositories, and their ids (a primary on `main`, one on `trunk`). */
  owner(): string;
  ids: [number, number];
}

export interface Side {
  name: string;
  runs: RunsSide;
  repohost: RepohostSide;
  stop(): Promise<void>;
}

const logger = createLogger({ service: 'threads-contract', level: 'silent' });

async function connect(nats: IsolatedNats): Promise<NatsConnection> {
  return connectNats({ servers: nats.url, auth: nats.testAuth, name: 'threads-contract', logger });
}

async function doubleSide(): Promise<Side> {
  const nats = await isolatedNats();
  await nats.provision();
  const nc = await connect(nats);
  const { js } = await jetStreamOf(nc);
  const runs = await serveRunsDouble(nc, js, logger);
  const repohost = await serveRepohostDouble(nc, logger);
  const claims = new Map<string, string>();
  const [app, lib] = KNOWN_REPOSITORIES;
  return {
    name: 'double',
    runs: {
      nc,
      async claim(runId) {
        const claimId = newClaimId();
        runs.hold(runId, claimId);
        claims.set(runId, claimId);
        runs.setStatus(runId, 'starting');
        return claimId;
      },
      async attest(_runId, subject, digest) {
        runs.attest(subject, digest);
      },
      async end(runId, status) {
        await runs.transition(runId, status);
      },
    },
    repohost: {
      nc,
      owner() {
        const owner = uniqueId('usr_');
        repohost.grant(owner);
        return owner;
      },
      ids: [app!.repository_id, lib!.repository_id],
    },
    async stop() {
      await runs.stop();
      await repohost.stop();
      await nc.drain();
      await nats.stop();
    },
  };
}

async function realSide(): Promise<Side> {
  const nats = await isolatedNats();
  const prefix = uniqueDbPrefix();
  const reposDir = mkdtempSync(join(tmpdir(), 'threads-contract-repos-'));
  const services: StartedService[] = [];
  services.push(await startRuns(loadConfig(RunsConfig, baseServiceEnv(nats.env('runs'), prefix))));
  services.push(
    await startRepohost(
      loadConfig(RepohostConfig, { ...baseServiceEnv(nats.env('repohost'), prefix), REPOHOST_LOCAL_DIR: reposDir }),
    ),
  );
  createBareRepo(reposDir, 'app');
  createBareRepo(reposDir, 'lib', { branch: 'trunk' });
  const nc = await connect(nats);
  const drivers = new Map<string, RunDriver>();
  const driver = (runId: string) => {
    const found = drivers.get(runId);
    if (!found) throw new Error(`run ${runId} was not claimed`);
    return found;
  };
  return {
    name: 'real',
    runs: {
      nc,
      async claim(runId) {
        const claimed = await RunDriver.claim(nc, runId);
        drivers.set(runId, claimed);
        return claimed.claimId;
      },
      async attest(runId, subject, digest) {
        const held = driver(runId);
        await request(nc, rpc.runs.attest, {
          run_id: runId,
          attempt: held.attempt,
          claim_id: held.claimId,
          subject,
          digest,
        });
      },
      async end(runId, status) {
        const held = driver(runId);
        await held.to('running');
        await held.to(status, status === 'failed' ? { error: { code: 'harness_error', message: 'failed' } } : {});
      },
    },
    repohost: {
      nc,
      owner: () => uniqueId('usr_'),
      ids: [localRepositoryId('app'), localRepositoryId('lib')],
    },
    async stop() {
      await nc.drain();
      for (const service of services.reverse()) await service.stop();
      await nats.stop();
      rmSync(reposDir, { recursive: true, force: true });
    },
  };
}

/** The two sides the contract holds on: the doubles, and the real services they stand in for. */
export const SIDES = [
  ['double', doubleSide],
  ['real', realSide],
] as const;

/**
 * The side the tests of a `describe` share, started before them and stopped after. It is filled in
 * once started, so the tests can hold it from the start.
 */
export function sharedSide(start: () => Promise<Side>): Side {
  const side = {} as Side;
  let started: Side | undefined;
  beforeAll(async () => {
    started = await start();
    Object.assign(side, started);
  });
  afterAll(async () => {
    await started?.stop();
  });
  return side;
}

export async function failure<E extends RpcEndpoint>(
  nc: NatsConnection,
  endpoint: E,
  payload: z.input<E['request']>,
): Promise<AppError> {
  const outcome = await request(nc, endpoint, payload).then(
    (result) => ({ result }),
    (err: unknown) => ({ err }),
  );
  if (!('err' in outcome)) throw new Error(`expected ${endpoint.subject} to fail, got ${JSON.stringify(outcome)}`);
  if (!(outcome.err instanceof AppError)) throw outcome.err;
  return outcome.err;
}

export function admission(overrides: Partial<AdmitRequest> = {}): AdmitRequest {
  return {
    owner_id: uniqueId('usr_'),
    thread_id: uniqueId('thr_'),
    project_id: uniqueId('prj_'),
    message_id: uniqueId('msg_'),
    admission_key: uniqueId('adm_'),
    run_id: `run_${randomBytes(16).toString('hex')}`,
    prompt: 'Fix the build',
    repositories: [
      {
        project_repository_id: uniqueId('prr_'),
        repository_id: 101,
        full_name: 'acme/app',
        branch: 'main',
        clone_url: 'https://git.example.test/acme/app.git',
      },
    ],
    ...overrides,
  };
}
