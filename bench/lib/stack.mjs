// The stack the benchmarks measure, on loopback, started by the local launcher
// (deploy/local/launcher.mjs) as `npm start` starts it: nats-server and FerretDB (data in a temp dir
// that is removed at the end), every service as its own process from services/*/dist (so build
// first), plus the baseline server; then a user with an API key and a local repository to open
// threads on. Every process is stopped by its pid, in reverse order of starting.
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { SERVICES, STREAM_NAMES } from '@threadwork/contracts';
import { connectNats, createLogger, jetStreamOf } from '@threadwork/platform';
import { createBareRepo, testNatsAuth } from '@threadwork/testing';
import { createStack, freePort, root, SERVICES as SERVICE_NAMES } from '../../deploy/local/launcher.mjs';

/** Services that answer NATS requests, by the name their NATS micro service has. */
const RPC_SERVICES = { runs: SERVICES.runs.name, repohost: SERVICES.repohost.name, threads: SERVICES.threads.name };

/** The runner's durable RUN_JOBS consumer for a harness (handlers/jobs.ts names it so). */
const runnerConsumer = (harness) => `runner-${harness}`;

const READY_TIMEOUT_MS = 60_000;
/** Output kept to show when a process dies: the launcher keeps at least half of it, the last 4,000 characters. */
const OUTPUT_TAIL = 8_000;

export const log = (line) => process.stderr.write(`bench: ${line}\n`);

async function waitUntil(what, probe, timeoutMs = READY_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`${what} was not ready within ${timeoutMs} ms`);
}

/**
 * Starts everything. `runnerEnv` adds runner settings (the fake models' endpoints, its concurrency,
 * its HARNESSES); `harnesses` are those it serves; `profile` names services (or `baseline`) to start
 * with `--cpu-prof` into `profileDir`.
 */
export async function startStack({ runnerEnv = {}, harnesses = ['codex'], profile = [], profileDir } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-bench-'));
  const port = await freePort();
  const baselinePort = await freePort();
  const reposDir = join(dir, 'repos');
  mkdirSync(reposDir);
  const dbPrefix = 'bench';
  // Each service as its own NATS identity, with its grant, as deployed; the bench's own client may do anything.
  const natsAuth = testNatsAuth();
  const nodeArgs = (name) => (profile.includes(name) ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []);
  const launched = createStack({
    dir,
    nats: { config: natsAuth.config },
    ferret: {},
    natsKeys: natsAuth.keys,
    env: {
      ...process.env,
      MONGO_DB_PREFIX: dbPrefix,
      REPOHOST_LOCAL_DIR: reposDir,
      SANDBOX_ROOT: join(dir, 'sandboxes'),
      SESSION_SECRET: randomBytes(32).toString('base64url'),
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      // The per-caller limit would otherwise be what the read benchmarks measure.
      RATE_LIMIT_PER_SECOND: '1000000000',
      RATE_LIMIT_BURST: '1000000000',
      // Benchmark 5 holds hundreds of event streams as one user; the per-user cap would refuse them.
      MAX_FOLLOWERS_PER_USER: '1000000',
      // The benchmarks make many threads and hold many runs live as that one user.
      MAX_LIVE_RUNS_PER_USER: '0',
      THREADS_PER_MINUTE_PER_USER: '0',
      // Runs held for the read benchmarks are admitted for a harness no runner serves (lib/runs.mjs);
      // the runner's own list (runnerEnv) names only those it serves.
      HARNESSES: [...harnesses, 'bench'].join(','),
    },
    services: [
      ...SERVICE_NAMES.map((role) => ({
        role,
        nodeArgs: nodeArgs(role),
        ...(role === 'runner' ? { env: runnerEnv } : {}),
      })),
      // It stands in for the gateway, so it connects as the gateway.
      {
        role: 'baseline',
        script: join(root, 'bench', 'lib', 'baseline-server.mjs'),
        identity: 'gateway',
        env: { PORT: String(baselinePort) },
        nodeArgs: nodeArgs('baseline'),
      },
    ],
    // Services drain in-flight work on SIGTERM; a profile (--cpu-prof) is written as they exit.
    stopTimeoutMs: 15_000,
    outputLimit: OUTPUT_TAIL,
    onLine: (proc, line) => proc.kind === 'service' && process.stderr.write(`[${proc.name}] ${line}\n`),
    onStopError: (_proc, err) => log(`stopping failed: ${err.message}`),
  });
  let nc;

  const stack = {
    dir,
    /** Every node process started, by name: the services and the baseline server. */
    get services() {
      return new Map(launched.processes.filter((p) => p.kind === 'service').map((p) => [p.name, p]));
    },
    /** Stops every process started, newest first, and removes the temp dir. Safe to call twice. */
    async stop() {
      // autocannon drops its connections when a round ends; let the requests they left in flight
      // finish rather than fail against services that are stopping.
      await sleep(1_000);
      if (nc && !nc.isClosed()) await nc.close();
      await launched.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    /** Pids of every process of the stack, by name: the servers, the services and the baseline. */
    processIds() {
      const byKind = (kind) => launched.processes.filter((p) => p.kind === kind).map((p) => [p.name, p.pid]);
      return new Map([...byKind('service'), ...byKind('server')]);
    },
    /** Throws if a service died: its figures would be meaningless. */
    assertRunning() {
      for (const service of stack.services.values()) {
        if (!service.alive()) throw new Error(`${service.name} exited unexpectedly:\n${service.output()}`);
      }
    },
  };

  try {
    await launched.start();
    const nats = launched.process('nats-server');
    nc = await connectNats({
      servers: nats.url,
      auth: natsAuth.testAuth,
      name: 'bench',
      logger: createLogger({ service: 'bench', level: 'silent' }),
    });
    const { js, jsm } = await jetStreamOf(nc);
    const base = `http://127.0.0.1:${port}`;
    const baselineBase = `http://127.0.0.1:${baselinePort}`;
    await waitUntil('gateway', async () => (await fetch(`${base}/readyz`)).ok);
    await waitUntil('baseline server', async () => (await fetch(`${baselineBase}/healthz`)).ok);
    for (const [name, micro] of Object.entries(RPC_SERVICES)) {
      await waitUntil(name, async () => Boolean(await nc.request(`$SRV.PING.${micro}`, undefined, { timeout: 500 })));
    }
    for (const harness of harnesses) {
      await waitUntil(`runner (${harness})`, async () =>
        Boolean(await jsm.consumers.info(STREAM_NAMES.runJobs, runnerConsumer(harness))),
      );
    }
    stack.assertRunning();

    const key = createApiKey(launched.env, 'bench');
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    createBareRepo(reposDir, 'bench', { files: { 'README.md': '# Bench\n' } });
    const repos = await (await fetch(`${base}/v1/repohost/repositories`, { headers })).json();
    const repositoryId = repos.repositories[0].repository_id;

    /**
     * Replaces the runner with one started with `extra` on top of its settings; resolves once it
     * consumes the jobs of every harness it serves (`extra.HARNESSES`, else all).
     */
    stack.restartRunner = async (extra = {}) => {
      const runner = await launched.restart('runner', { env: extra });
      const served = extra.HARNESSES?.split(',') ?? harnesses;
      await waitUntil('runner', async () => {
        if (!runner.alive()) throw new Error(`the runner exited:\n${runner.output()}`);
        const infos = await Promise.all(
          served.map((harness) => jsm.consumers.info(STREAM_NAMES.runJobs, runnerConsumer(harness))),
        );
        return infos.every((info) => info.num_waiting > 0);
      });
    };

    /** Starts one more gateway replica on a port of its own; resolves with its base URL once it is ready. */
    stack.addGateway = async () => {
      const replicaPort = await freePort();
      await launched.add('gateway', { PORT: String(replicaPort) });
      const replicaBase = `http://127.0.0.1:${replicaPort}`;
      await waitUntil('gateway replica', async () => (await fetch(`${replicaBase}/readyz`)).ok);
      return replicaBase;
    };

    /**
     * Starts one more runner, with sandboxes of its own (as each replica has its own disk); resolves
     * once Codex's consumer (what benchmark 10 drives) has a waiting pull per runner.
     */
    stack.addRunner = async () => {
      const runners = () => [...stack.services.values()].filter((p) => p.role === 'runner');
      const runner = await launched.add('runner', { SANDBOX_ROOT: join(dir, `sandboxes-${runners().length + 1}`) });
      const count = runners().length;
      await waitUntil('runner replica', async () => {
        if (!runner.alive()) throw new Error(`the runner replica exited:\n${runner.output()}`);
        return (await jsm.consumers.info(STREAM_NAMES.runJobs, runnerConsumer('codex'))).num_waiting >= count;
      });
      return runner;
    };

    return Object.assign(stack, {
      base,
      baselineBase,
      headers,
      key,
      nc,
      js,
      jsm,
      nats,
      ferret: launched.process('ferretdb'),
      dbPrefix,
      repositoryId,
    });
  } catch (err) {
    for (const service of stack.services.values()) if (!service.alive()) log(`${service.name}: ${service.output()}`);
    await stack.stop();
    throw err;
  }
}

/** A user and an API key through the gateway's admin CLI (the key is its last line of output). */
function createApiKey(env, login) {
  const admin = spawnSync(
    process.execPath,
    [join(root, 'services', 'gateway', 'dist', 'admin.js'), 'keys', 'create', '--user', login],
    { env, encoding: 'utf8' },
  );
  if (admin.status !== 0) throw new Error(`admin keys create failed: ${admin.stderr}`);
  return admin.stdout.trim().split('\n').at(-1);
}

/** A JSON request to the public API; throws on a status other than the expected ones. */
export async function api(stack, method, path, body, { expect = [200, 201, 202] } = {}) {
  const res = await fetch(`${stack.base}${path}`, {
    method,
    headers: stack.headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!expect.includes(res.status)) {
    const err = new Error(`${method} ${path}: ${res.status} ${text}`);
    err.status = res.status;
    throw err;
  }
  return text ? JSON.parse(text) : null;
}
