import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { domainEvents, rpc, type AdmitRequest, type RpcEndpoint } from '@threadwork/contracts';
import {
  AppError,
  connectNats,
  createLogger,
  domainEventDigest,
  encodeJson,
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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { KNOWN_REPOSITORIES, serveRepohostDouble, serveRunsDouble } from './support/doubles.js';

// The threads tests keep doubles of the runs and repohost endpoints for what the real services do
// not let a test arrange: an admission whose answer is lost or held back, runs unreachable for
// exactly one call, a run that moves while its `live` answer travels, a run moved before its DOMAIN
// event is out, and an owner who sees no repository. Everything else they rely on is checked here
// against the real services, through the same cases, so the doubles cannot drift from them.

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

interface Side {
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

async function failure<E extends RpcEndpoint>(
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

function admission(overrides: Partial<AdmitRequest> = {}): AdmitRequest {
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

describe.each([
  ['double', doubleSide],
  ['real', realSide],
] as const)('runs and repohost as threads uses them (%s)', (_name, start) => {
  let side: Side;
  beforeAll(async () => {
    side = await start();
  });
  afterAll(async () => {
    await side?.stop();
  });

  const admit = (req: AdmitRequest) => request(side.runs.nc, rpc.runs.admit, req);

  it('admits by key with the defaults, one live run per thread, each owner seeing only their own', async () => {
    const req = admission();
    const { run } = await admit(req);
    expect(run).toMatchObject({
      id: req.run_id,
      thread_id: req.thread_id,
      project_id: req.project_id,
      message_id: req.message_id,
      status: 'queued',
      terminal: false,
      harness: 'codex',
      model: 'gpt-5-codex',
      reasoning_effort: 'medium',
      collaboration_mode: 'default',
      completed_at: null,
    });
    const chosen = await admit(
      admission({ model: 'gpt-5', collaboration_mode: 'plan', thread_id: uniqueId('thr_'), owner_id: req.owner_id }),
    );
    expect(chosen.run).toMatchObject({ model: 'gpt-5', collaboration_mode: 'plan' });

    // The same key is the same run, whatever else the request says.
    expect((await admit({ ...req, run_id: undefined, prompt: 'Other' })).run.id).toBe(run.id);
    const busy = await failure(
      side.runs.nc,
      rpc.runs.admit,
      admission({ owner_id: req.owner_id, thread_id: req.thread_id }),
    );
    expect(busy.code).toBe('thread_busy');

    const owner = { owner_id: req.owner_id };
    expect(await request(side.runs.nc, rpc.runs.get, { ...owner, run_id: run.id })).toMatchObject({ id: run.id });
    const stranger = { owner_id: uniqueId('usr_') };
    expect((await failure(side.runs.nc, rpc.runs.get, { ...stranger, run_id: run.id })).code).toBe('not_found');
    expect(
      (await request(side.runs.nc, rpc.runs.getMany, { ...owner, run_ids: [run.id, chosen.run.id, 'run_unknown'] }))
        .runs,
    ).toEqual(
      expect.arrayContaining([
        { id: run.id, status: 'queued' },
        { id: chosen.run.id, status: 'queued' },
      ]),
    );
    expect((await request(side.runs.nc, rpc.runs.getMany, { ...stranger, run_ids: [run.id] })).runs).toEqual([]);
    expect((await request(side.runs.nc, rpc.runs.live, { ...owner, thread_id: req.thread_id })).run?.id).toBe(run.id);
    expect((await request(side.runs.nc, rpc.runs.live, { ...stranger, thread_id: req.thread_id })).run).toBeNull();
    expect(await request(side.runs.nc, rpc.runs.liveCount, { ...owner, at_most: 5 })).toEqual({ live: 2 });
    expect(await request(side.runs.nc, rpc.runs.liveCount, { ...owner, at_most: 1 })).toEqual({ live: 1 });
  });

  it('frees the thread when its run ends; the ended run stays its key’s answer', async () => {
    const req = admission();
    const { run } = await admit(req);
    await side.runs.claim(run.id);
    await side.runs.end(run.id, 'completed');
    const owner = { owner_id: req.owner_id };
    const ended = await request(side.runs.nc, rpc.runs.get, { ...owner, run_id: run.id });
    expect(ended).toMatchObject({ status: 'completed', terminal: true, completed_at: expect.any(String) });
    expect((await request(side.runs.nc, rpc.runs.live, { ...owner, thread_id: req.thread_id })).run).toBeNull();
    expect(await request(side.runs.nc, rpc.runs.liveCount, { ...owner, at_most: 5 })).toEqual({ live: 0 });
    expect((await admit(req)).run).toMatchObject({ id: run.id, terminal: true });

    const next = await admit(admission({ owner_id: req.owner_id, thread_id: req.thread_id }));
    expect(next.run).toMatchObject({ status: 'queued', terminal: false });
    await side.runs.claim(next.run.id);
    await side.runs.end(next.run.id, 'failed');
    expect(await request(side.runs.nc, rpc.runs.get, { ...owner, run_id: next.run.id })).toMatchObject({
      status: 'failed',
      terminal: true,
    });
  });

  it('names the owner of a run to its holder only, while it is live', async () => {
    const req = admission();
    const { run } = await admit(req);
    const claimId = await side.runs.claim(run.id);
    expect(await request(side.runs.nc, rpc.runs.holder, { run_id: run.id, claim_id: claimId })).toEqual({
      owner_id: req.owner_id,
      repository_ids: [101],
    });
    const other = await failure(side.runs.nc, rpc.runs.holder, { run_id: run.id, claim_id: newClaimId() });
    expect(other.code).toBe('already_settled');
    await side.runs.end(run.id, 'completed');
    const after = await failure(side.runs.nc, rpc.runs.holder, { run_id: run.id, claim_id: claimId });
    expect(after.code).toBe('already_settled');
  });

  it('confirms a runner event only as attested, of its run’s thread and owner', async () => {
    const req = admission();
    const { run } = await admit(req);
    await side.runs.claim(run.id);
    const subject = domainEvents.messageCompleted.subject;
    const event = {
      thread_id: req.thread_id,
      run_id: run.id,
      message_key: 'k',
      text: 'Done.',
      at: new Date().toISOString(),
    };
    const digest = domainEventDigest(encodeJson(event));
    const ask = (
      fields: Partial<{
        thread_id: string;
        owner_id: string;
        digest: string;
        subject: string;
        repository: { project_repository_id: string; repository_id: number };
      }> = {},
    ) =>
      request(side.runs.nc, rpc.runs.attestation, {
        run_id: run.id,
        thread_id: req.thread_id,
        subject,
        digest,
        ...fields,
      });

    expect((await ask()).confirmed).toBe(false);
    await side.runs.attest(run.id, subject, digest);
    expect(await ask()).toEqual({ confirmed: true, reason: null });
    expect(await ask({ owner_id: req.owner_id })).toEqual({ confirmed: true, reason: null });
    expect((await ask({ thread_id: uniqueId('thr_') })).confirmed).toBe(false);
    expect((await ask({ owner_id: uniqueId('usr_') })).confirmed).toBe(false);
    // An event about one of the run's repositories names it as the run does.
    const [repository] = req.repositories;
    const named = { project_repository_id: repository!.project_repository_id, repository_id: 101 };
    expect(await ask({ repository: named })).toEqual({ confirmed: true, reason: null });
    expect((await ask({ repository: { ...named, project_repository_id: uniqueId('prr_') } })).confirmed).toBe(false);
    expect((await ask({ repository: { ...named, repository_id: 202 } })).confirmed).toBe(false);
    expect((await ask({ subject: domainEvents.controlApplied.subject })).confirmed).toBe(false);
    expect(
      (
        await request(side.runs.nc, rpc.runs.attestation, {
          run_id: 'run_unknown',
          thread_id: req.thread_id,
          subject,
          digest,
        })
      ).confirmed,
    ).toBe(false);
  });

  it('gives an owner the repositories asked for, in that order; not_found for one they cannot see', async () => {
    const owner = side.repohost.owner();
    const [primary, second] = side.repohost.ids;
    const { repositories } = await request(side.repohost.nc, rpc.repohost.access, {
      owner_id: owner,
      repository_ids: [second, primary],
    });
    expect(repositories.map((r) => [r.repository_id, r.default_branch])).toEqual([
      [second, 'trunk'],
      [primary, 'main'],
    ]);
    for (const repository of repositories) {
      expect(repository.full_name).toMatch(/\/(app|lib)$/);
      expect(repository.clone_url).toBeTruthy();
    }
    const missing = await failure(side.repohost.nc, rpc.repohost.access, {
      owner_id: owner,
      repository_ids: [primary, 999],
    });
    expect(missing.code).toBe('not_found');
  });
});
