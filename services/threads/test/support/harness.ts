import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AdmitRequest,
  DOMAIN_STREAM,
  domainEvents,
  rpc,
  type EventDef,
  type Message,
  type Run,
  type RunStatusEvent,
  type RpcEndpoint,
} from '@threadwork/contracts';
import {
  AppError,
  connectMongo,
  connectNats,
  createLogger,
  decodeJson,
  domainEventDigest,
  encodeJson,
  jetStreamOf,
  loadConfig,
  publishJson,
  request,
  serviceDbName,
  type Db,
  type JetStreamClient,
  type MongoClient,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import { localRepositoryId, RepohostConfig, startRepohost } from '@threadwork/repohost';
import { RunsConfig, startRuns } from '@threadwork/runs';
import {
  baseServiceEnv,
  createBareRepo,
  isolatedNats,
  RunDriver,
  testInfra,
  uniqueDbPrefix,
  uniqueId,
  domainHandled,
  waitFor,
  type IsolatedNats,
} from '@threadwork/testing';
import type { z } from 'zod';
import { THREADS_CONSUMER, ThreadsConfig, startThreads } from '../../src/index.js';
import { KNOWN_REPOSITORIES, serveRepohostDouble, serveRunsDouble, type RunsDouble } from './doubles.js';

/** What every threads harness gives a test, whatever stands behind runs and repohost. */
export interface BaseHarness {
  nc: NatsConnection;
  js: JetStreamClient;
  /** threads' own database, to count what it stored. */
  db: Db;
  /** The ids of the two repositories every owner sees: `app` (on `main`) and `lib` (on `trunk`). */
  repos: { app: number; lib: number };
  call<E extends RpcEndpoint>(endpoint: E, payload: z.input<E['request']>): Promise<z.output<E['response']>>;
  /** The AppError a call answers with (fails the test if it succeeds). */
  callError<E extends RpcEndpoint>(endpoint: E, payload: z.input<E['request']>): Promise<AppError>;
  /** A fresh owner who can see the known repositories. */
  newOwner(): string;
  /** A thread of a fresh owner on `repos.app` (and any `more.repository_ids`), with its first run. */
  newThread(
    prompt?: string,
    more?: { repository_ids?: number[] },
  ): Promise<{
    owner: string;
    thread: z.output<typeof rpc.threads.create.response>;
    target: { owner_id: string; thread_id: string };
  }>;
  /** A thread's messages as its owner reads them. */
  messages(target: { owner_id: string; thread_id: string }): Promise<Message[]>;
  /** Publishes a DOMAIN event, a runner's attested first as its run's holder does (unless `forged`); its sequence. */
  publishDomain(event: EventDef, payload: unknown, msgId?: string, options?: { forged?: boolean }): Promise<number>;
  /** Resolves once threads has handled (acked) every DOMAIN event up to stream sequence `seq`. */
  handledUpTo(seq: number): Promise<void>;
  stop(): Promise<void>;
}

/** The real runs service, as the tests look at it. */
export interface RealRuns {
  /** Every admit request threads sent, in order (repeats included), as heard on its subject. */
  readonly admissions: AdmitRequest[];
  /** `threadId`'s admit request once heard: it may arrive after runs' answer reached threads. */
  admissionOf(threadId: string): Promise<AdmitRequest>;
  /** Runs created, oldest first. */
  created(threadId?: string): Promise<Run[]>;
  run(runId: string): Promise<Run>;
  /** Claims a queued run as a runner does (it moves to `starting`); the driver moves it on. */
  claim(runId: string): Promise<RunDriver>;
  /**
   * Ends a run as its runner does (claiming it first if nobody holds it): its terminal DOMAIN
   * event, and a stream sequence of run status events at or past it (for handledUpTo).
   */
  end(runId: string, status: 'completed' | 'failed'): Promise<{ event: RunStatusEvent; seq: number }>;
  /** Cancels a queued run, as its owner does. */
  cancel(runId: string): Promise<{ event: RunStatusEvent; seq: number }>;
  /** Attests a runner's DOMAIN event about the run under its holder's claim (claiming it if nobody holds it). */
  attest(runId: string, subject: string, event: unknown): Promise<void>;
}

/** threads against the real runs and repohost services. */
export interface Harness extends BaseHarness {
  runs: RealRuns;
}

/** threads against the doubles, for what the real services do not let a test arrange (doubles.ts). */
export interface DoublesHarness extends BaseHarness {
  runs: RunsDouble;
}

/** A thread's messages as `role:text`, one a message. */
export const texts = (list: Message[]) => list.map((m) => `${m.role}:${m.parts.map((p) => p.text).join('')}`);

interface HarnessOptions {
  replicas?: number;
  env?: Record<string, string>;
}

/** What stands behind threads: runs and repohost, real or doubles. */
interface Peers {
  stop(): Promise<void>;
  repos: BaseHarness['repos'];
  newOwner(): string;
  /** Attests a runner's DOMAIN event about run `runId`, as the run's holder does. */
  attest(runId: string, subject: string, event: unknown): Promise<void>;
}

/** `replicas` threads services on the file's own NATS server, sharing one database as replicas do. */
async function startThreadsOn(
  nats: IsolatedNats,
  prefix: string,
  { replicas = 1, env = {} }: HarnessOptions,
  peers: Peers,
): Promise<BaseHarness> {
  const { repos, newOwner } = peers;
  const logger = createLogger({ service: 'threads-test', level: 'silent' });
  const nc = await connectNats({ servers: nats.url, auth: nats.testAuth, name: 'threads-test', logger });
  const { js, jsm } = await jetStreamOf(nc);
  const config = loadConfig(ThreadsConfig, { ...baseServiceEnv(nats.env('threads'), prefix), ...env });
  const services: StartedService[] = [];
  for (let i = 0; i < replicas; i += 1) services.push(await startThreads(config));
  const mongo: MongoClient = await connectMongo({ url: testInfra().mongoUrl, appName: 'threads-test' });
  const db = mongo.db(serviceDbName(prefix, 'threads'));

  const call = <E extends RpcEndpoint>(endpoint: E, payload: z.input<E['request']>) =>
    request(nc, endpoint, payload, { timeoutMs: 15_000 });

  return {
    nc,
    js,
    db,
    repos,
    call,
    async callError(endpoint, payload) {
      const outcome = await call(endpoint, payload).then(
        (result) => ({ result }),
        (err: unknown) => ({ err }),
      );
      if (!('err' in outcome)) throw new Error(`expected ${endpoint.subject} to fail, got ${JSON.stringify(outcome)}`);
      if (!(outcome.err instanceof AppError)) throw outcome.err;
      return outcome.err;
    },
    newOwner,
    async newThread(prompt = 'Start', more = {}) {
      const owner = newOwner();
      const thread = await call(rpc.threads.create, {
        owner_id: owner,
        view: 'thread',
        body: { repository_id: repos.app, prompt, ...more },
      });
      return { owner, thread, target: { owner_id: owner, thread_id: thread.id } };
    },
    async messages(target) {
      return (await call(rpc.threads.messages, { ...target, limit: 200 })).messages;
    },
    async publishDomain(event, payload, msgId, { forged = false } = {}) {
      const subject = event.subject;
      if (subject.startsWith('evt.runner.') && !forged)
        await peers.attest((payload as { run_id: string }).run_id, subject, payload);
      return (await publishJson(js, subject, payload, msgId ? { msgId } : {})).seq;
    },
    handledUpTo: (seq) => domainHandled(jsm, THREADS_CONSUMER, seq),
    async stop() {
      for (const service of services.reverse()) await service.stop();
      await peers.stop();
      await nc.drain();
      await mongo.close();
      await nats.stop();
    },
  };
}

/**
 * A NATS server of this file's own, with the real runs and repohost services (repohost's local
 * provider, over two bare repositories) and `replicas` threads services. `env` overrides the
 * threads services' configuration.
 */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const nats = await isolatedNats();
  const prefix = uniqueDbPrefix();
  const reposDir = mkdtempSync(join(tmpdir(), 'threads-test-repos-'));
  createBareRepo(reposDir, 'app');
  createBareRepo(reposDir, 'lib', { branch: 'trunk' });
  const peers: StartedService[] = [];
  peers.push(await startRuns(loadConfig(RunsConfig, baseServiceEnv(nats.env('runs'), prefix))));
  peers.push(
    await startRepohost(
      loadConfig(RepohostConfig, { ...baseServiceEnv(nats.env('repohost'), prefix), REPOHOST_LOCAL_DIR: reposDir }),
    ),
  );
  const mongo: MongoClient = await connectMongo({ url: testInfra().mongoUrl, appName: 'threads-test-runs' });
  const runsDb = mongo.db(serviceDbName(prefix, 'runs'));

  const base = await startThreadsOn(nats, prefix, options, {
    async stop() {
      for (const service of peers.reverse()) await service.stop();
      await mongo.close();
      rmSync(reposDir, { recursive: true, force: true });
    },
    repos: { app: localRepositoryId('app'), lib: localRepositoryId('lib') },
    // The local provider shows its repositories to everyone.
    newOwner: () => uniqueId('usr_'),
    // Called only once the harness is up, when `runs` stands.
    attest: (runId, subject, event) => runs.attest(runId, subject, event),
  });

  const admissions: AdmitRequest[] = [];
  const heard = base.nc.subscribe(rpc.runs.admit.subject);
  void (async () => {
    for await (const msg of heard) {
      // As sent: parsing would fill in what the schema defaults, and tests look at what was left out.
      const sent = decodeJson(msg.data);
      if (AdmitRequest.safeParse(sent).success) admissions.push(sent as AdmitRequest);
    }
  })();

  const drivers = new Map<string, RunDriver>();
  const claim = async (runId: string) => {
    const driver = await RunDriver.claim(base.nc, runId);
    drivers.set(runId, driver);
    return driver;
  };
  const { jsm } = await jetStreamOf(base.nc);
  const runStatusSubject = domainEvents.runStatus.subject;
  /** Does `move`, then waits for the run's terminal status event as runs publishes it. */
  const terminalEvent = async (runId: string, move: () => Promise<unknown>) => {
    const events = base.nc.subscribe(runStatusSubject);
    const heard = (async () => {
      for await (const msg of events) {
        const event = decodeJson(msg.data) as RunStatusEvent;
        if (event.run_id === runId && event.terminal) return event;
      }
      return null;
    })();
    try {
      await move();
      const event = await heard;
      if (!event) throw new Error(`no terminal status event of run ${runId}`);
      // The latest run status event in the stream: at or past this one, and one threads handles.
      const last = await jsm.streams.getMessage(DOMAIN_STREAM.name, { last_by_subj: runStatusSubject });
      if (!last) throw new Error('no run status event in DOMAIN');
      return { event, seq: last.seq };
    } finally {
      events.unsubscribe();
    }
  };
  const ownerOf = async (runId: string) => {
    const doc = await runsDb.collection<{ _id: string; owner_id: string }>('runs').findOne({ _id: runId });
    if (!doc) throw new Error(`no run ${runId}`);
    return doc.owner_id;
  };
  const runOf = (ownerId: string, runId: string) =>
    request(base.nc, rpc.runs.get, { owner_id: ownerId, run_id: runId });
  const runs: RealRuns = {
    admissions,
    admissionOf: (threadId) =>
      waitFor(`the admission of ${threadId} to be heard`, () => admissions.find((a) => a.thread_id === threadId)),
    async created(threadId) {
      const docs = await runsDb
        .collection<{ _id: string; owner_id: string; thread_id: string; created_at: Date }>('runs')
        .find(threadId === undefined ? {} : { thread_id: threadId })
        .sort({ created_at: 1, _id: 1 })
        .toArray();
      return Promise.all(docs.map((doc) => runOf(doc.owner_id, doc._id)));
    },
    run: async (runId) => runOf(await ownerOf(runId), runId),
    claim,
    end: (runId, status) =>
      terminalEvent(runId, async () => {
        const driver = drivers.get(runId) ?? (await claim(runId));
        if ((await runs.run(runId)).status === 'starting') await driver.to('running');
        await driver.to(status, status === 'failed' ? { error: { code: 'harness_error', message: 'failed' } } : {});
      }),
    async cancel(runId) {
      const owner = await ownerOf(runId);
      return terminalEvent(runId, () => request(base.nc, rpc.runs.cancel, { owner_id: owner, run_id: runId }));
    },
    async attest(runId, subject, event) {
      const driver = drivers.get(runId) ?? (await claim(runId));
      await request(base.nc, rpc.runs.attest, {
        run_id: runId,
        attempt: driver.attempt,
        claim_id: driver.claimId,
        subject,
        digest: domainEventDigest(encodeJson(event)),
      });
    },
  };
  return { ...base, runs };
}

/**
 * As startHarness, with doubles of the runs and repohost endpoints in place of the services: for
 * the tests that need a state the real ones do not let a test arrange (see doubles.ts).
 */
export async function startHarnessWithDoubles(options: HarnessOptions = {}): Promise<DoublesHarness> {
  const logger = createLogger({ service: 'threads-test', level: 'silent' });
  const nats = await isolatedNats();
  await nats.provision();
  const nc = await connectNats({ servers: nats.url, auth: nats.testAuth, name: 'threads-doubles', logger });
  const { js } = await jetStreamOf(nc);
  const runs = await serveRunsDouble(nc, js, logger);
  const repohost = await serveRepohostDouble(nc, logger);
  const [app, lib] = KNOWN_REPOSITORIES;
  const base = await startThreadsOn(nats, uniqueDbPrefix(), options, {
    async stop() {
      await runs.stop();
      await repohost.stop();
      await nc.drain();
    },
    repos: { app: app!.repository_id, lib: lib!.repository_id },
    newOwner() {
      const owner = uniqueId('usr_');
      repohost.grant(owner);
      return owner;
    },
    attest: async (_runId, subject, event) => runs.attest(subject, domainEventDigest(encodeJson(event))),
  });
  return { ...base, runs };
}
