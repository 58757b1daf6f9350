import { spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger, connectNats, type NatsConnection } from '@threadwork/platform';
import {
  createBareRepo,
  scriptsByPrompt,
  startFakeModel,
  testNatsAuth,
  uniqueDbPrefix,
  uniqueId,
  type FakeModelServer,
  type FakeScript,
} from '@threadwork/testing';
import { spawnGuarded, startFerretDb, startNatsServer, type LocalServer } from '../../../deploy/local/servers.mjs';
import { ensureTool } from '../../../deploy/local/tools.mjs';
import { freePort, root } from '../../support/process-stack.js';

// A whole Threadwork deployment on this machine for fault tests: its own nats-server and FerretDB
// (restartable on the same store and port), and every service as a process of its own, run from
// its build (`services/<name>/dist`) exactly as the local stack runs it. Faults are injected by
// pid; the tests look at the outcome through the public API.

export type Role = 'runs' | 'repohost' | 'review' | 'threads' | 'runner' | 'gateway';

/** The order services come up in: callees before callers. */
const CORE: Role[] = ['runs', 'repohost', 'review', 'threads', 'gateway'];
const OUTPUT_LIMIT = 256 * 1024;

export interface ServiceProcess {
  /** `runs`, `gateway`, `runner-1`, … */
  name: string;
  role: Role;
  pid: number;
  child: ChildProcess;
  env: Record<string, string>;
  /** The newest part of what it printed (JSON log lines). */
  output(): string;
  /** Resolves when the process has exited, however it was stopped. */
  exited: Promise<void>;
  alive(): boolean;
  /** SIGTERM (a graceful stop), SIGKILL after 15 s. */
  stop(): Promise<void>;
  /** SIGKILL (a crash); resolves once it is gone. */
  kill(): Promise<void>;
}

export interface ClusterOptions {
  /** Runner processes to start (none by default: tests then drive runs themselves). */
  runners?: number;
  /** Fake model scripts by prompt prefix; the newest user text with a known prefix picks one. */
  scripts?: Map<string, FakeScript>;
  /** Variables for every service. */
  env?: Record<string, string>;
  /** Variables for runners only. */
  runnerEnv?: Record<string, string>;
  /** A runner that dies is started again, as its supervisor would (a Kubernetes restart). */
  restartRunners?: boolean;
  /** Where runners keep sandboxes, when not in the cluster's own directory (it is removed on stop too). */
  sandboxRoot?: string;
}

export interface ChaosUser {
  login: string;
  key: string;
  headers: Record<string, string>;
}

function dist(role: Role): string {
  const main = join(root, 'services', role, 'dist', 'main.js');
  if (!existsSync(main)) throw new Error(`${main} is missing: the fault tests run the built services (npm run build)`);
  return main;
}

async function waitReady(url: string, proc: ServiceProcess, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (!proc.alive()) throw new Error(`${proc.name} exited while starting:\n${proc.output()}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
      if (res.ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${proc.name} was not ready at ${url}:\n${proc.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export class Cluster {
  readonly services = new Map<string, ServiceProcess>();
  /** Every runner that was started, including the ones that have died since. */
  readonly runnerHistory: ServiceProcess[] = [];
  private runnerCount = 0;
  private stopping = false;
  private ncs: NatsConnection[] = [];

  private constructor(
    readonly dir: string,
    readonly env: Record<string, string>,
    readonly gatewayPort: number,
    public nats: LocalServer,
    /** Every identity's NATS key, and the server configuration that admits them with their grants. */
    readonly natsAuth: ReturnType<typeof testNatsAuth>,
    public ferret: LocalServer,
    readonly fake: FakeModelServer | undefined,
    private readonly options: ClusterOptions,
  ) {}

  get gatewayUrl(): string {
    return `http://127.0.0.1:${this.gatewayPort}`;
  }
  get reposDir(): string {
    return join(this.dir, 'repos');
  }
  get sandboxRoot(): string {
    return this.options.sandboxRoot ?? join(this.dir, 'sandboxes');
  }

  static async start(options: ClusterOptions = {}): Promise<Cluster> {
    const dir = mkdtempSync(join(tmpdir(), 'threadwork-chaos-'));
    // As above a deployment's SANDBOX_ROOT: a sandbox's own uid (a runner running as root) may pass.
    chmodSync(dir, 0o711);
    const natsAuth = testNatsAuth();
    const nats = await startNatsServer({
      binary: ensureTool('nats-server'),
      dir: join(dir, 'nats'),
      config: natsAuth.config,
    });
    const ferret = await startFerretDb({ binary: ensureTool('ferretdb'), dir: join(dir, 'ferretdb') });
    const fake = options.scripts ? await startFakeModel(scriptsByPrompt(options.scripts)) : undefined;
    const gatewayPort = await freePort();
    mkdirSync(join(dir, 'repos'));
    const inherited = Object.entries(process.env).filter(
      (e): e is [string, string] => e[1] !== undefined && !/^(VITEST|NATS_|MONGO_|OTEL_)/.test(e[0]),
    );
    const env: Record<string, string> = {
      ...Object.fromEntries(inherited),
      NATS_URL: nats.url,
      MONGO_URL: ferret.url,
      MONGO_DB_PREFIX: uniqueDbPrefix(),
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'info',
      SHUTDOWN_TIMEOUT_MS: '5000',
      SESSION_SECRET: uniqueId('session-secret-').padEnd(48, 'x'),
      REPOHOST_LOCAL_DIR: join(dir, 'repos'),
      SANDBOX_ROOT: options.sandboxRoot ?? join(dir, 'sandboxes'),
      HOST: '127.0.0.1',
      PORT: String(gatewayPort),
      // Limits are not what these tests are about.
      RATE_LIMIT_PER_SECOND: '100000',
      RATE_LIMIT_BURST: '100000',
      MAX_LIVE_RUNS_PER_USER: '0',
      THREADS_PER_MINUTE_PER_USER: '0',
      // The runs service's RUN_JOBS ack wait: a lost runner's job moves on within seconds.
      JOB_ACK_WAIT_MS: '2000',
      ...options.env,
    };
    const cluster = new Cluster(dir, env, gatewayPort, nats, natsAuth, ferret, fake, options);
    try {
      for (const role of CORE) await cluster.startService(role);
      for (let i = 0; i < (options.runners ?? 0); i++) await cluster.startRunner();
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** Starts one service process and waits until its readiness endpoint answers. */
  async startService(role: Role, extraEnv: Record<string, string> = {}, name: string = role): Promise<ServiceProcess> {
    // The gateway answers its probes on its own port.
    const healthPort = role === 'gateway' ? this.gatewayPort : await freePort();
    const env = {
      ...this.env,
      NATS_NKEY_SEED: this.natsAuth.keys[role].seed,
      HEALTH_PORT: role === 'gateway' ? '0' : String(healthPort),
      ...extraEnv,
    };
    const child = spawnGuarded(process.execPath, [dist(role)], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.length > OUTPUT_LIMIT) output = output.slice(-OUTPUT_LIMIT / 2);
    };
    child.stdout!.on('data', collect);
    child.stderr!.on('data', collect);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const alive = () => child.exitCode === null && child.signalCode === null;
    const proc: ServiceProcess = {
      name,
      role,
      pid: child.pid as number,
      child,
      env,
      output: () => output,
      exited,
      alive,
      async stop() {
        if (!alive()) return;
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      },
      async kill() {
        if (alive()) child.kill('SIGKILL');
        await exited;
      },
    };
    this.services.set(name, proc);
    await waitReady(`http://127.0.0.1:${healthPort}/readyz`, proc);
    return proc;
  }

  /** Starts another runner on the shared sandbox root (runners of one node), with its own id. */
  async startRunner(extraEnv: Record<string, string> = {}): Promise<ServiceProcess> {
    const n = ++this.runnerCount;
    const env: Record<string, string> = {
      RUNNER_ID: `chaos-runner-${n}`,
      RUN_POLL_MS: '300',
      ...(this.fake ? { MODEL_BASE_URL: this.fake.baseUrl, MODEL_API_KEY: `sk-chaos-${uniqueId()}` } : {}),
      ...this.options.runnerEnv,
      ...extraEnv,
    };
    const proc = await this.startService('runner', env, `runner-${n}`);
    this.runnerHistory.push(proc);
    if (this.options.restartRunners) {
      void proc.exited.then(async () => {
        if (this.stopping || this.services.get(proc.name) !== proc) return;
        this.services.delete(proc.name);
        await new Promise((resolve) => setTimeout(resolve, 200));
        if (!this.stopping) await this.startRunner(extraEnv).catch(() => undefined);
      });
    }
    return proc;
  }

  service(name: string): ServiceProcess {
    const proc = this.services.get(name);
    if (!proc) throw new Error(`no service ${name} (have ${[...this.services.keys()].join(', ')})`);
    return proc;
  }

  runners(): ServiceProcess[] {
    return [...this.services.values()].filter((s) => s.role === 'runner' && s.alive());
  }

  /** The harness (codex) processes below a runner that work in the thread's sandbox. */
  harnessPids(runnerPid: number, threadId: string): number[] {
    const sandbox = join(this.sandboxRoot, threadId);
    return descendantsOf(runnerPid).filter((p) => {
      if (!commandLine(p).includes('codex')) return false;
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
    const old = this.service(name);
    await old.stop();
    const { HEALTH_PORT: _health, ...extra } = Object.fromEntries(
      Object.entries(old.env).filter(([k, v]) => this.env[k] !== v),
    );
    return this.startService(old.role, extra, name);
  }

  /** `kill -9` a service, then start it again with the same name, port and settings. */
  async crashAndRestartService(name: string): Promise<ServiceProcess> {
    const old = this.service(name);
    await old.kill();
    const { HEALTH_PORT: _health, ...extra } = Object.fromEntries(
      Object.entries(old.env).filter(([k, v]) => this.env[k] !== v),
    );
    return this.startService(old.role, extra, name);
  }

  /** `kill -9` nats-server, then start it again on the same store and port. */
  async crashAndRestartNats(downMs = 0): Promise<void> {
    await this.nats.stop('SIGKILL');
    if (downMs) await new Promise((resolve) => setTimeout(resolve, downMs));
    this.nats = await startNatsServer({
      binary: ensureTool('nats-server'),
      dir: join(this.dir, 'nats'),
      port: this.nats.port,
      config: this.natsAuth.config,
    });
  }

  /** Stops FerretDB (`kill -9`); `startFerret` brings it back on the same store and port. */
  async stopFerret(): Promise<void> {
    await this.ferret.stop('SIGKILL');
  }

  async startFerret(): Promise<void> {
    this.ferret = await startFerretDb({
      binary: ensureTool('ferretdb'),
      dir: join(this.dir, 'ferretdb'),
      port: this.ferret.port,
    });
  }

  /**
   * Freezes FerretDB (`SIGSTOP`): connections stay open and nothing answers, as in a network
   * partition or a stalled disk. `thawFerret` (`SIGCONT`) lets it go on where it stopped.
   */
  freezeFerret(): void {
    process.kill(this.ferret.pid, 'SIGSTOP');
  }

  thawFerret(): void {
    process.kill(this.ferret.pid, 'SIGCONT');
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

  fetch(path: string, init: RequestInit & { user?: ChaosUser } = {}): Promise<Response> {
    const { user, headers, ...rest } = init;
    return fetch(`${this.gatewayUrl}${path}`, {
      ...rest,
      headers: { ...(user?.headers ?? {}), ...(headers as Record<string, string> | undefined) },
    });
  }

  /** A NATS connection of the test's own (reconnecting like the services' do). */
  async connect(): Promise<NatsConnection> {
    const nc = await connectNats({
      servers: this.nats.url,
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
    this.stopping = true;
    for (const nc of this.ncs) await nc.close().catch(() => undefined);
    for (const proc of [...this.services.values()].reverse()) await proc.stop();
    await this.fake?.close();
    await this.ferret.stop();
    await this.nats.stop();
    rmSync(this.dir, { recursive: true, force: true });
    if (this.options.sandboxRoot) rmSync(this.options.sandboxRoot, { recursive: true, force: true });
  }
}

/** The pids of a process's descendants (children first), from /proc. */
export function descendantsOf(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of spawnSync('ps', ['-e', '-o', 'pid=,ppid='], { encoding: 'utf8' }).stdout.split('\n')) {
    const [child, parent] = entry.trim().split(/\s+/).map(Number);
    if (!child || !parent) continue;
    children.set(parent, [...(children.get(parent) ?? []), child]);
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** Reads a process's command line (empty once it is gone). */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}
