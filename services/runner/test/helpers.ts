import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rpc, subjects, type RpcRequest, type Run, type RunEvent } from '@threadwork/contracts';
import {
  AppError,
  connectMongo,
  connectNats,
  createLogger,
  decodeJson,
  loadConfig,
  publishSignal,
  request,
  serviceDbName,
  type MongoClient,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import { RunsConfig, startRuns } from '@threadwork/runs';
import { ThreadsConfig, startThreads } from '@threadwork/threads';
import {
  baseServiceEnv,
  createBareRepo,
  isolatedNats,
  agent,
  scriptsByPrompt,
  startFakeModel,
  uniqueDbPrefix,
  uniqueId,
  type FakeModelServer,
  type FakeScript,
  type IsolatedNats,
  waitFor,
} from '@threadwork/testing';
import { RunnerConfig, startRunner, type RunnerService } from '../src/index.js';

export const MODEL_KEY = `sk-test-${uniqueId('key')}`;

export interface DomainEvent {
  subject: string;
  data: Record<string, unknown>;
}

export type Env = Record<string, string | undefined>;

export interface StackOptions {
  /** Runner variables over the defaults (undefined removes one). */
  runner?: Env;
  runs?: Env;
  threads?: Env;
  /**
   * Where the test's directory (and so SANDBOX_ROOT) goes; the system's temporary directory by
   * default. A required jail with Codex's sandbox needs sandboxes outside it (/var/tmp).
   */
  parentDir?: string;
}

export interface Stack extends BaseStack {
  fake: FakeModelServer;
}

/** A stack whose runner serves one harness, against the fake model of that harness's API. */
export interface AgentStack extends BaseStack {
  harness: agent.HarnessName;
  agent: agent.AgentFake;
}

interface BaseStack {
  nats: IsolatedNats;
  nc: NatsConnection;
  runs: StartedService;
  /** The threads service, which the runner asks for the text of a steer it is signalled. */
  threads: StartedService;
  runner: RunnerService;
  dir: string;
  sandboxRoot: string;
  /** Every DOMAIN event published since the stack started. */
  domain: DomainEvent[];
  baseEnv: Record<string, string>;
  runnerEnv(extra?: Env): Env;
  /**
   * Stores a steer of the run as the threads service does when its owner steers it (the
   * control's target is the run unless `targetRunId` says otherwise); returns the control id.
   */
  recordSteer(
    admitted: Admitted,
    prompt: string,
    opts?: { targetRunId?: string; status?: 'pending' | 'applied' },
  ): Promise<string>;
  /** Signals a steer of `controlId` to the run, as the threads service does once it stored it. */
  signalSteer(runId: string, controlId: string): void;
  stop(): Promise<void>;
}

/**
 * A runs service and a runner in-process on a NATS server of this file's own, the runner pointed
 * at a fake model that dispatches on the prompt: each test registers a script under a prompt prefix.
 */
export async function startStack(scripts: Map<string, FakeScript>, options: StackOptions = {}): Promise<Stack> {
  const fake = await startFakeModel(scriptsByPrompt(scripts));
  const stack = await startBaseStack(
    { MODEL_BASE_URL: fake.baseUrl, MODEL_API_KEY: MODEL_KEY },
    () => fake.close(),
    options,
  );
  return Object.assign(stack, { fake });
}

/**
 * The same stack with a runner serving `harness` only, its fake model playing `scripts` in that
 * harness's API: the cases both harnesses must pass are written once against it.
 */
export async function startAgentStack(
  harness: agent.HarnessName,
  scripts: Map<string, agent.AgentScript>,
  options: StackOptions = {},
): Promise<AgentStack> {
  const fake = await agent.startAgentFake(harness, agent.agentScriptsByPrompt(scripts));
  const stack = await startBaseStack({ ...fake.runnerEnv(MODEL_KEY), HARNESSES: harness }, () => fake.close(), {
    ...options,
    runs: { HARNESSES: harness, DEFAULT_HARNESS: harness, ...options.runs },
    threads: { HARNESSES: harness, DEFAULT_HARNESS: harness, ...options.threads },
  });
  return Object.assign(stack, { harness, agent: fake });
}

async function startBaseStack(model: Env, closeModel: () => Promise<void>, options: StackOptions): Promise<BaseStack> {
  const nats = await isolatedNats();
  const dbPrefix = uniqueDbPrefix();
  const baseEnv = baseServiceEnv(nats.env('runner'), dbPrefix);
  const runs = await startRuns(
    loadConfig(RunsConfig, { ...baseServiceEnv(nats.env('runs'), dbPrefix), RUN_MAX_ATTEMPTS: '3', ...options.runs }),
  );
  const dir = mkdtempSync(join(options.parentDir ?? tmpdir(), 'threadwork-runner-test-'));
  // As above a deployment's SANDBOX_ROOT: a sandbox's own uid (a runner running as root) may pass.
  chmodSync(dir, 0o711);
  const sandboxRoot = join(dir, 'sandboxes');
  const runnerEnv = (extra: Env = {}): Env => ({
    ...baseEnv,
    SANDBOX_ROOT: sandboxRoot,
    RUNNER_ID: uniqueId('runner-'),
    ...model,
    RUN_POLL_MS: '300',
    // Spare sandboxes (a harness started ahead) only where a test asks for them: warm.test.ts.
    RUNNER_WARM_SANDBOXES: '0',
    ...options.runner,
    ...extra,
  });
  const threads = await startThreads(
    loadConfig(ThreadsConfig, { ...baseServiceEnv(nats.env('threads'), dbPrefix), ...options.threads }),
  );
  const mongo: MongoClient = await connectMongo({ url: baseEnv.MONGO_URL!, appName: 'runner-test' });
  const controls = mongo.db(serviceDbName(dbPrefix, 'threads')).collection<{ _id: string }>('controls');
  const runner = await startRunner(loadConfig(RunnerConfig, runnerEnv()));
  const nc = await connectNats({
    servers: nats.url,
    auth: nats.testAuth,
    name: 'runner-test',
    logger: createLogger({ service: 'runner-test', level: 'silent' }),
  });
  const domain: DomainEvent[] = [];
  nc.subscribe('evt.>', {
    callback: (err, msg) => {
      if (!err) domain.push({ subject: msg.subject, data: decodeJson(msg.data) as Record<string, unknown> });
    },
  });
  await nc.flush();
  const stack: BaseStack = {
    nats,
    nc,
    runs,
    runner,
    dir,
    sandboxRoot,
    domain,
    baseEnv,
    runnerEnv,
    threads,
    async recordSteer(admitted, prompt, opts = {}) {
      const controlId = uniqueId('ctl_');
      // The threads service's control record (services/threads/src/store/records.ts).
      await controls.insertOne({
        _id: controlId,
        owner_id: admitted.owner,
        thread_id: admitted.threadId,
        kind: 'steer',
        status: opts.status ?? 'pending',
        prompt,
        prompt_parts: [{ type: 'text', text: prompt }],
        collaboration_mode: 'default',
        target_run_id: opts.targetRunId ?? admitted.run.id,
        created_run_id: null,
        message_id: uniqueId('msg_'),
        run_id: uniqueId('run_'),
        created_at: new Date(),
        applied_at: opts.status === 'applied' ? new Date() : null,
      } as { _id: string });
      return controlId;
    },
    signalSteer(runId, controlId) {
      publishSignal(nc, subjects.runSignal(runId), { type: 'steer', control_id: controlId });
    },
    async stop() {
      // The runner a test may have swapped in, not necessarily the one started here.
      await stack.runner.stop();
      await nc.drain();
      await threads.stop();
      await mongo.close();
      await runs.stop();
      await closeModel();
      await nats.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return stack;
}

export interface Admitted {
  run: Run;
  owner: string;
  threadId: string;
  bare: string;
  admittedAt: number;
  request: RpcRequest<typeof rpc.runs.admit>;
}

/** The owner of each run admitted here: reads of a run are for its owner. */
const owners = new Map<string, string>();

function ownerOf(runId: string): string {
  const owner = owners.get(runId);
  if (!owner) throw new Error(`run ${runId} was not admitted by admitRun`);
  return owner;
}

/** A bare repository with a README, and a run admitted on it (as the threads service would). */
export async function admitRun(
  stack: BaseStack,
  prompt: string,
  overrides: Partial<RpcRequest<typeof rpc.runs.admit>> = {},
  bare?: string,
): Promise<Admitted> {
  const repo = bare ?? createBareRepo(join(stack.dir, 'repos'), uniqueId('app'), { files: { 'README.md': '# App\n' } });
  const req: RpcRequest<typeof rpc.runs.admit> = {
    owner_id: uniqueId('usr_'),
    thread_id: uniqueId('thr_'),
    project_id: uniqueId('prj_'),
    message_id: uniqueId('msg_'),
    admission_key: uniqueId('adm_'),
    prompt,
    model: 'test-model',
    repositories: [
      {
        project_repository_id: uniqueId('prp_'),
        repository_id: 7,
        full_name: 'acme/app',
        branch: 'main',
        clone_url: `file://${repo}`,
      },
    ],
    ...overrides,
  };
  const admittedAt = Date.now();
  const { run } = await request(stack.nc, rpc.runs.admit, req);
  owners.set(run.id, req.owner_id);
  return { run, owner: req.owner_id, threadId: req.thread_id, bare: repo, admittedAt, request: req };
}

export async function getRun(stack: BaseStack, runId: string): Promise<Run> {
  return request(stack.nc, rpc.runs.get, { owner_id: ownerOf(runId), run_id: runId });
}

export async function waitForStatus(
  stack: BaseStack,
  runId: string,
  statuses: readonly string[],
  timeoutMs = 60_000,
): Promise<Run> {
  return waitFor(
    `run ${runId} to be ${statuses.join(' or ')}`,
    async () => {
      // A read that went unanswered (the machine busy with a runner starting) is "not yet".
      const run = await getRun(stack, runId).catch((err: unknown) => {
        if (err instanceof AppError && err.retryable) return undefined;
        throw err;
      });
      return run && statuses.includes(run.status) ? run : undefined;
    },
    timeoutMs,
  );
}

export const waitForTerminal = (stack: BaseStack, runId: string, timeoutMs = 60_000) =>
  waitForStatus(stack, runId, ['completed', 'failed', 'cancelled'], timeoutMs);

export async function readLog(nc: NatsConnection, runId: string): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  let from = 1;
  for (;;) {
    const page = await request(nc, rpc.runs.eventsPage, { owner_id: ownerOf(runId), run_id: runId, from, limit: 1000 });
    events.push(...page.events);
    if (page.events.length === 0) return events;
    from = page.next_sequence;
  }
}

export type Chunk = { type: string; [key: string]: unknown };

export const chunks = (events: RunEvent[]): Chunk[] => events.map((e) => e.chunk as Chunk);

/** `run.status` chunks as `run.status:<status>`, others by type: the shape of a log for order checks. */
export const shape = (events: RunEvent[]): string[] =>
  chunks(events).map((c) => (c.type === 'run.status' ? `run.status:${String(c.status)}` : c.type));

/** Whether `wanted` appears in `seq` in this order (not necessarily adjacent). */
export function isSubsequence(seq: readonly string[], wanted: readonly string[]): boolean {
  let i = 0;
  for (const item of seq) if (item === wanted[i]) i++;
  return i === wanted.length;
}

export function domainOf(stack: BaseStack, verb: string, runOrThread: string): DomainEvent[] {
  return stack.domain.filter(
    (e) => e.subject.endsWith(verb) && (e.data.run_id === runOrThread || e.data.thread_id === runOrThread),
  );
}

/**
 * Git as a person looking at a workspace would run it, changing nothing there (`status` writes no
 * refreshed index). Where the runner runs as root, a workspace and the agent's `.git` in it belong
 * to the sandbox's own uid, which git run by another user refuses to work in unless told it is safe.
 */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'safe.directory=*', '--no-optional-locks', ...args], { cwd, encoding: 'utf8' });
}

/**
 * Processes of a thread's harness still running anywhere on this machine: those whose environment
 * names the thread's harness home (any runner's, the processes they started included).
 */
export function harnessesOf(sandboxRoot: string, threadId: string): number[] {
  const marker = `CODEX_HOME=${join(sandboxRoot, threadId, 'codex-home')}\0`;
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'utf8').includes(marker)) found.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** Whether a process is alive (signal 0 checks without signalling). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export { waitFor };

/** Every file under `dir`, at any depth. */
export function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}
