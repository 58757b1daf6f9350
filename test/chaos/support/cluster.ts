import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readlinkSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, connectNats, type NatsConnection } from '@threadwork/platform';
import {
  createBareRepo,
  startNatsCluster,
  testNatsAuth,
  uniqueDbPrefix,
  uniqueId,
  type agent,
  type FakeModelServer,
  type NatsCluster,
} from '@threadwork/testing';
import {
  createStack,
  root,
  type LaunchedProcess,
  type LaunchedServer,
  type LocalStack,
  type ServiceSpec,
} from '../../../deploy/local/launcher.mjs';
import { ensureTool } from '../../../deploy/local/tools.mjs';
import { startModels, type ModelOptions, type Models } from './models.js';
import { commandLine, descendantsOf } from './processes.js';

export { commandLine, descendantsOf };

// A whole Threadwork deployment on this machine for fault tests, started by the local launcher as
// `npm start` starts it: its own nats-server (or a JetStream cluster of them) and FerretDB
// (restartable on the same store and port), and every service as a process of its own, run from
// its build (`services/<name>/dist`). Faults are injected by pid; the tests look at the outcome
// through the public API.

export type Role = 'runs' | 'repohost' | 'review' | 'threads' | 'runner' | 'gateway';

/** The order services come up in: callees before callers, runners last. */
const CORE = ['runs', 'repohost', 'review', 'threads', 'gateway'] as const;

/** One process of a service (`runs`, `gateway`, `runner-1`, …); a restart makes a new one. */
export type ServiceProcess = LaunchedProcess & { role: Role };

export interface ClusterOptions extends ModelOptions {
  /** Runner processes to start (none by default: tests then drive runs themselves). */
  runners?: number;
  /** Processes of the other services (one each by default, named `runs`, …; given: `runs-1`, `runs-2`, …). */
  replicas?: Partial<Record<(typeof CORE)[number], number>>;
  /** Variables for every service. */
  env?: Record<string, string>;
  /** Variables for runners only. */
  runnerEnv?: Record<string, string>;
  /** A runner that dies is started again, as its supervisor would (a Kubernetes restart). */
  restartRunners?: boolean;
  /** Where runners keep sandboxes, when not in the cluster's own directory (it is removed on stop too). */
  sandboxRoot?: string;
  /**
   * Run NATS as a JetStream cluster of this many nats-servers (`natsCluster`) instead of one: the
   * services get every server's address in NATS_URL and keep the streams on all of them
   * (NATS_STREAM_REPLICAS).
   */
  natsServers?: number;
}

export interface ChaosUser {
  login: string;
  key: string;
  headers: Record<string, string>;
}

export class Cluster {
  /** Every runner that was started, including the ones that have died since. */
  readonly runnerHistory: ServiceProcess[] = [];
  private stack!: LocalStack;
  private ncs: NatsConnection[] = [];
  /** What each runner started by `startRunner` was given on top, for its supervisor to start it again so. */
  private readonly extraEnvOf = new Map<string, Record<string, string>>();

  /** The JetStream cluster, when started with `natsServers`. */
  natsCluster: NatsCluster | undefined;

  private constructor(
    readonly dir: string,
    /** Every identity's NATS key, and the server configuration that admits them with their grants. */
    readonly natsAuth: ReturnType<typeof testNatsAuth>,
    private readonly models: Models,
    private readonly options: ClusterOptions,
  ) {}

  /** The Responses API fake playing `scripts`. */
  get fake(): FakeModelServer | undefined {
    return this.models.fake;
  }
  /** The fake model of a harness served, playing `agentScripts`. */
  agent(harness: agent.HarnessName): agent.AgentFake {
    const fake = this.models.agents.get(harness);
    if (!fake) throw new Error(`no agent fake for ${harness} (have ${[...this.models.agents.keys()].join(', ')})`);
    return fake;
  }

  /**
   * The first gateway's address. The launcher picks its port, and picks again should another
   * process take it before the gateway binds it: the address is known once the gateway started.
   */
  get gatewayUrl(): string {
    return `http://127.0.0.1:${this.stack.processes.find((p) => p.role === 'gateway')!.port}`;
  }
  get reposDir(): string {
    return join(this.dir, 'repos');
  }
  get sandboxRoot(): string {
    return this.options.sandboxRoot ?? join(this.dir, 'sandboxes');
  }
  /** Every service's environment, with the servers' addresses. */
  get env(): Record<string, string> {
    return this.stack.env;
  }
  /** The single nats-server (a cluster started with `natsServers` has `natsCluster` instead). */
  get nats(): LaunchedServer {
    return this.stack.process('nats-server') as LaunchedServer;
  }
  get ferret(): LaunchedServer {
    return this.stack.process('ferretdb') as LaunchedServer;
  }
  /** The current process of every service started, by name (dead ones too). */
  get services(): Map<string, ServiceProcess> {
    const services = this.stack.processes.filter((p) => p.kind === 'service') as ServiceProcess[];
    return new Map(services.map((p) => [p.name, p]));
  }

  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    const dir = mkdtempSync(join(tmpdir(), 'threadwork-chaos-'));
    // As above a deployment's SANDBOX_ROOT: a sandbox's own uid (a runner running as root) may pass.
    chmodSync(dir, 0o711);
    const natsAuth = testNatsAuth();
    const models = await startModels(options);
    mkdirSync(join(dir, 'repos'));
    const inherited = Object.entries(process.env).filter(
      (e): e is [string, string] => e[1] !== undefined && !/^(VITEST|NATS_|MONGO_|OTEL_)/.test(e[0]),
    );
    const env: Record<string, string> = {
      ...Object.fromEntries(inherited),
      MONGO_DB_PREFIX: uniqueDbPrefix(),
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'info',
      SHUTDOWN_TIMEOUT_MS: '5000',
      SESSION_SECRET: uniqueId('session-secret-').padEnd(48, 'x'),
      REPOHOST_LOCAL_DIR: join(dir, 'repos'),
      SANDBOX_ROOT: options.sandboxRoot ?? join(dir, 'sandboxes'),
      HOST: '127.0.0.1',
      // Limits are not what these tests are about.
      RATE_LIMIT_PER_SECOND: '100000',
      RATE_LIMIT_BURST: '100000',
      MAX_LIVE_RUNS_PER_USER: '0',
      THREADS_PER_MINUTE_PER_USER: '0',
      // The runs service's RUN_JOBS ack wait: a lost runner's job moves on within seconds.
      JOB_ACK_WAIT_MS: '2000',
      ...models.env,
      ...options.env,
    };
    const cluster = new Cluster(dir, natsAuth, models, options);
    if (options.natsServers !== undefined) {
      try {
        cluster.natsCluster = await startNatsCluster({
          binary: ensureTool('nats-server'),
          size: options.natsServers,
          config: natsAuth.config,
          auth: natsAuth.testAuth,
        });
      } catch (err) {
        await models.close();
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
      env.NATS_STREAM_REPLICAS = String(options.natsServers);
    }
    const core = CORE.map((role): ServiceSpec => {
      const replicas = options.replicas?.[role];
      // Every gateway serves on a port of its own, picked by the launcher.
      const ports = role === 'gateway' ? { ports: [] } : {};
      return { role, ...(replicas === undefined ? {} : { replicas }), ...ports };
    });
    const runner: ServiceSpec = {
      role: 'runner',
      replicas: options.runners ?? 0,
      env: (n) => ({
        RUNNER_ID: `chaos-runner-${n}`,
        RUN_POLL_MS: '300',
        ...models.runnerEnv(),
        ...options.runnerEnv,
      }),
    };
    cluster.stack = createStack({
      dir,
      nats: cluster.natsCluster ? { url: cluster.natsCluster.url } : { config: natsAuth.config },
      ferret: {},
      natsKeys: natsAuth.keys,
      env,
      services: [...core, runner],
      health: true,
      stopTimeoutMs: 15_000,
      onStart: (proc) => {
        if (proc.role === 'runner') cluster.runnerHistory.push(proc as ServiceProcess);
      },
      onExit: (proc) => {
        if (proc.role === 'runner' && options.restartRunners) void cluster.superviseRunner(proc as ServiceProcess);
      },
    });
    try {
      await cluster.stack.start();
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** Starts another runner on the shared sandbox root (runners of one node), with its own id. */
  async startRunner(extraEnv: Record<string, string> = {}): Promise<ServiceProcess> {
    const proc = (await this.stack.add('runner', extraEnv)) as ServiceProcess;
    this.extraEnvOf.set(proc.name, extraEnv);
    return proc;
  }

  /** A dead runner's replacement, as a supervisor starts one: a new runner after a short pause. */
  private async superviseRunner(dead: ServiceProcess): Promise<void> {
    // One that never came up is not restarted: its start failed, and says why.
    if (!dead.ready) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
    if (!this.stack.stopping) await this.startRunner(this.extraEnvOf.get(dead.name) ?? {}).catch(() => undefined);
  }

  service(name: string): ServiceProcess {
    const proc = this.services.get(name);
    if (!proc) throw new Error(`no service ${name} (have ${[...this.services.keys()].join(', ')})`);
    return proc;
  }

  runners(): ServiceProcess[] {
    return [...this.services.values()].filter((s) => s.role === 'runner' && s.alive());
  }

  /** The harness (codex, claude) processes below a runner that work in the thread's sandbox. */
  /** The thread's sandbox folder: its own, or the spare sandbox it adopted (its name a link to that folder). */
  sandboxOf(threadId: string): string {
    const link = join(this.sandboxRoot, threadId);
    return existsSync(link) ? realpathSync(link) : link;
  }

  harnessPids(runnerPid: number, threadId: string): number[] {
    const sandbox = this.sandboxOf(threadId);
    return descendantsOf(runnerPid).filter((p) => {
      if (!/codex|claude/.test(commandLine(p))) return false;
      try {
        const cwd = readlinkSync(`/proc/${p}/cwd`);
        return cwd === sandbox || cwd.startsWith(`${sandbox}/`);
      } catch {
        return false;
      }
    });
  }

  /** The live runner with a harness working in the thread's sandbox (runners keep idle ones of other threads). */
  runnerHolding(threadId: string): ServiceProcess | undefined {
    return this.runners().find((r) => this.harnessPids(r.pid, threadId).length > 0);
  }

  /** Stops a service (SIGTERM) and starts it again with the same name, port and settings. */
  async restartService(name: string): Promise<ServiceProcess> {
    this.service(name);
    return (await this.stack.restart(name)) as ServiceProcess;
  }

  /** `kill -9` a service, then start it again with the same name, port and settings. */
  async crashAndRestartService(name: string): Promise<ServiceProcess> {
    this.service(name);
    return (await this.stack.restart(name, { crash: true })) as ServiceProcess;
  }

  /** `kill -9` nats-server, then start it again on the same store and port. */
  async crashAndRestartNats(downMs = 0): Promise<void> {
    await this.stack.restart('nats-server', { crash: true, downMs });
  }

  /** Stops FerretDB (`kill -9`); `startFerret` brings it back on the same store and port. */
  async stopFerret(): Promise<void> {
    await this.ferret.kill();
  }

  async startFerret(): Promise<void> {
    await this.stack.restart('ferretdb');
  }

  /**
   * Freezes FerretDB (`SIGSTOP`): connections stay open and nothing answers, as in a network
   * partition or a stalled disk. `thawFerret` (`SIGCONT`) lets it go on where it stopped.
   */
  freezeFerret(): void {
    this.ferret.pause();
  }

  thawFerret(): void {
    this.ferret.resume();
  }

  /** A user with an API key, made with the admin CLI as an operator would. */
  createUser(login = `u${uniqueId()}`): ChaosUser {
    const res = spawnSync(
      process.execPath,
      [join(root, 'services', 'gateway', 'dist', 'admin.js'), 'keys', 'create', '--user', login],
      {
        cwd: root,
        env: { ...this.env },
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    if (res.status !== 0) throw new Error(`admin keys create failed: ${res.stderr}${res.stdout}`);
    const key = res.stdout.trim().split('\n').at(-1) as string;
    return { login, key, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } };
  }

  /** A bare repository for the local provider, as listed to `user`; returns its repository_id. */
  async addRepo(user: ChaosUser, name = uniqueId('repo')): Promise<number> {
    createBareRepo(this.reposDir, name, { files: { 'README.md': `# ${name}\n` } });
    const res = await this.fetch(`/v1/repohost/repositories?q=${encodeURIComponent(name)}`, { user });
    const body = (await res.json()) as { repositories?: { repository_id: number; name: string }[] };
    const repo = body.repositories?.find((r) => r.name === name);
    if (!repo) throw new Error(`repository ${name} is not listed: ${JSON.stringify(body)}`);
    return repo.repository_id;
  }

  /** The address of one gateway replica (`gateway-2`, …), when started with `replicas.gateway`. */
  gatewayUrlOf(name: string): string {
    return `http://127.0.0.1:${this.service(name).port}`;
  }

  /** A request to the gateway: the first one, or the replica named `via`. */
  fetch(path: string, init: RequestInit & { user?: ChaosUser; via?: string } = {}): Promise<Response> {
    const { user, headers, via, ...rest } = init;
    return fetch(`${via === undefined ? this.gatewayUrl : this.gatewayUrlOf(via)}${path}`, {
      ...rest,
      headers: { ...(user?.headers ?? {}), ...(headers as Record<string, string> | undefined) },
    });
  }

  /** A NATS connection of the test's own (reconnecting like the services' do). */
  async connect(): Promise<NatsConnection> {
    const nc = await connectNats({
      servers: this.env.NATS_URL as string,
      auth: this.natsAuth.testAuth,
      name: 'chaos-test',
      logger: createLogger({ service: 'chaos-test', level: 'silent' }),
    });
    this.ncs.push(nc);
    return nc;
  }

  /** Everything every service printed, for a failing test's message. */
  logs(): string {
    return [...this.services.values()].map((s) => `--- ${s.name} (pid ${s.pid})\n${s.output()}`).join('\n');
  }

  async stop(): Promise<void> {
    for (const nc of this.ncs) await nc.close().catch(() => undefined);
    await this.stack.stop();
    await this.natsCluster?.stop();
    await this.models.close();
    rmSync(this.dir, { recursive: true, force: true });
    if (this.options.sandboxRoot) rmSync(this.options.sandboxRoot, { recursive: true, force: true });
  }
}
