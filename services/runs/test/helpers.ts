import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { rpc, type RpcRequest, type Run, type RunEvent } from '@threadwork/contracts';
import {
  AppError,
  connectMongo,
  connectNats,
  createLogger,
  loadConfig,
  request,
  serviceDbName,
  type Db,
  type MongoClient,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import {
  baseServiceEnv,
  isolatedNats,
  newClaimId,
  testInfra,
  uniqueDbPrefix,
  uniqueId,
  type IsolatedNats,
} from '@threadwork/testing';
import { expect } from 'vitest';
import { RunsConfig, startRuns } from '../src/index.js';
import { createEventArchive, type EventArchive } from '../src/store/event-archive.js';
import { createInteractionStore, type InteractionStore } from '../src/store/interactions.js';
import { createRunStore, type RunStore } from '../src/store/runs.js';

export interface Harness {
  nats: IsolatedNats;
  service: StartedService;
  nc: NatsConnection;
  jsm: JetStreamManager;
  /** The service's own collections, to set up the state a crash would leave behind. */
  store: RunStore;
  interactions: InteractionStore;
  /** The service's archive of run event logs. */
  archive: EventArchive;
  /** The database the service's collections are in. */
  db: Db;
  /** The prefix of its databases, to start another replica over them. */
  dbPrefix: string;
  stop(): Promise<void>;
}

/**
 * A runs service of its own (own NATS server, own database) and a client connection to it. A
 * `MONGO_URL` in `env` puts both on that database server instead of the test run's.
 */
export async function startHarness(env: Record<string, string> = {}): Promise<Harness> {
  const nats = await isolatedNats();
  const dbPrefix = uniqueDbPrefix();
  const service = await startRuns(loadConfig(RunsConfig, { ...baseServiceEnv(nats.env('runs'), dbPrefix), ...env }));
  const mongo: MongoClient = await connectMongo({ url: env.MONGO_URL ?? testInfra().mongoUrl, appName: 'runs-test' });
  const db = mongo.db(serviceDbName(dbPrefix, 'runs'));
  const nc = await connectNats({
    servers: nats.url,
    auth: nats.testAuth,
    name: 'runs-test',
    logger: createLogger({ service: 'runs-test', level: 'silent' }),
  });
  const jsm = await jetstreamManager(nc);
  return {
    nats,
    service,
    nc,
    jsm,
    store: createRunStore(db),
    interactions: createInteractionStore(db),
    archive: createEventArchive(db),
    db,
    dbPrefix,
    async stop() {
      await mongo.close();
      await nc.drain();
      await service.stop();
      await nats.stop();
    },
  };
}

export function admission(
  overrides: Partial<RpcRequest<typeof rpc.runs.admit>> = {},
): RpcRequest<typeof rpc.runs.admit> {
  return {
    owner_id: uniqueId('usr_'),
    thread_id: uniqueId('thr_'),
    project_id: uniqueId('prj_'),
    message_id: uniqueId('msg_'),
    admission_key: uniqueId('adm_'),
    prompt: 'Fix the failing test',
    repositories: [
      {
        project_repository_id: uniqueId('prp_'),
        repository_id: 42,
        full_name: 'acme/app',
        branch: 'main',
        clone_url: 'file:///srv/git/acme/app.git',
      },
    ],
    ...overrides,
  };
}

/** The AppError a call failed with (fails the test if it succeeded). */
export async function failure(promise: Promise<unknown>): Promise<AppError> {
  const outcome = await promise.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  if (outcome.ok) throw new Error(`expected a failure, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.err).toBeInstanceOf(AppError);
  return outcome.err as AppError;
}

/**
 * The holders of a run fall silent for longer than a lease, as after a kill -9 or a lost network:
 * a claim (a redelivered job) may take the run over now. The runs service writes when it last
 * heard from a holder at most every quarter lease, so a holder's calls just after this do not
 * renew it either.
 */
export async function silence(h: Harness, runId: string): Promise<void> {
  await h.store.attempts.updateMany({ run_id: runId }, { $set: { heard_at: new Date(0) } });
}

export interface LiveRun {
  run: Run;
  owner: string;
  attempt: number;
  /** The claim's secret, the holder's proof. */
  claim_id: string;
}

/** Admits a run, claims it and moves it to `running`, as a runner would. */
export async function runningRun(nc: NatsConnection, overrides: Partial<RpcRequest<typeof rpc.runs.admit>> = {}) {
  const req = admission(overrides);
  const { run } = await request(nc, rpc.runs.admit, req);
  const claimId = newClaimId();
  const claim = await request(nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-a', claim_id: claimId });
  const running = await request(nc, rpc.runs.transition, {
    run_id: run.id,
    attempt: claim.attempt,
    claim_id: claimId,
    to: 'running',
  });
  expect(running.status).toBe('running');
  return { run: running, owner: req.owner_id, attempt: claim.attempt, claim_id: claimId, thread_id: req.thread_id };
}

/** Reads of a run are for its owner: the test reads as the owner the store names. */
async function ownerOf(h: Harness, runId: string): Promise<string> {
  return (await h.store.runs.findOne({ _id: runId }))?.owner_id ?? 'usr_nobody';
}

/** The run as its owner reads it. */
export async function getRun(h: Harness, runId: string): Promise<Run> {
  return request(h.nc, rpc.runs.get, { owner_id: await ownerOf(h, runId), run_id: runId });
}

/** Every event of a run, page by page, as its owner reads them. */
export async function readLog(h: Harness, runId: string, limit = 1000): Promise<RunEvent[]> {
  const owner_id = await ownerOf(h, runId);
  const events: RunEvent[] = [];
  let from = 1;
  for (;;) {
    const page = await request(h.nc, rpc.runs.eventsPage, { owner_id, run_id: runId, from, limit });
    events.push(...page.events);
    if (page.events.length === 0) return events;
    from = page.next_sequence;
  }
}

/** The `run.status` chunks of a run's log, in order. */
export async function statusLog(h: Harness, runId: string): Promise<string[]> {
  return (await readLog(h, runId))
    .map((e) => e.chunk as { type: string; status?: string })
    .filter((c) => c.type === 'run.status')
    .map((c) => c.status ?? '');
}
