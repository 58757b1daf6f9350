// The stack the benchmarks measure, on loopback: nats-server and FerretDB (data in a temp dir that
// is removed at the end), every service as its own process from services/*/dist (so build first),
// a user with an API key, and a local repository to open threads on. Every process is started with
// spawnGuarded (it gets SIGTERM if we die) and stopped by its pid, in reverse order of starting.
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { SERVICES, STREAM_NAMES } from '@threadwork/contracts';
import { connectNats, createLogger, jetStreamOf } from '@threadwork/platform';
import { createBareRepo, testNatsAuth } from '@threadwork/testing';
import { spawnGuarded, startFerretDb, startNatsServer } from '../../deploy/local/servers.mjs';
import { ensureTool } from '../../deploy/local/tools.mjs';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Start order: services others call come first (as in deploy/local/stack.mjs); they stop in reverse. */
export const SERVICE_NAMES = ['runs', 'repohost', 'review', 'threads', 'runner', 'gateway'];

/** Services that answer NATS requests, by the name their NATS micro service has. */
const RPC_SERVICES = { runs: SERVICES.runs.name, repohost: SERVICES.repohost.name, threads: SERVICES.threads.name };

/** The runner's durable RUN_JOBS consumer for the default harness (handlers/jobs.ts names it so). */
const RUNNER_CONSUMER = 'runner-codex';

const READY_TIMEOUT_MS = 60_000;

export const log = (line) => process.stderr.write(`bench: ${line}\n`);

/** Forwards a child's output to our stderr line by line, prefixed with its name; keeps the tail for errors. */
function forwardLines(child, name) {
  let tail = '';
  for (const stream of [child.stdout, child.stderr]) {
    let buffered = '';
    stream.on('data', (chunk) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.trim()) continue;
        process.stderr.write(`[${name}] ${line}\n`);
        tail = `${tail}${line}\n`.slice(-4_000);
      }
    });
  }
  return () => tail;
}

/** A node process of ours: `pid` is node's own (setpriv execs), so /proc/<pid> is the process itself. */
function startNode(name, script, { env, nodeArgs = [] }) {
  const child = spawnGuarded(process.execPath, [...nodeArgs, script], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = forwardLines(child, name);
  const exited = new Promise((done) => child.once('exit', (code, signal) => done({ code, signal })));
  let stopping = false;
  return {
    name,
    pid: child.pid,
    exited,
    get running() {
      return child.exitCode === null && child.signalCode === null;
    },
    output,
    async stop() {
      if (stopping || child.exitCode !== null || child.signalCode !== null) return;
      stopping = true;
      child.kill('SIGTERM');
      // Services drain in-flight work on SIGTERM; a profile (--cpu-prof) is written as they exit.
      const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** A port nothing listens on now (the kernel picks it; it is free again once we close). */
function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

async function waitUntil(what, probe, timeoutMs = READY_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`${what} was not ready within ${timeoutMs} ms`);
}

/**
 * Starts everything. `runnerEnv` adds runner settings (MODEL_BASE_URL of the fake model, its
 * concurrency); `profile` names services (or `baseline`) to start with `--cpu-prof` into `profileDir`.
 */
export async function startStack({ runnerEnv = {}, profile = [], profileDir } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-bench-'));
  const stops = [];
  /** Every node process started, by name: the services and the baseline server. */
  const services = new Map();
  let nc;

  const stack = {
    dir,
    services,
    /** Stops every process started, newest first, and removes the temp dir. Safe to call twice. */
    async stop() {
      // autocannon drops its connections when a round ends; let the requests they left in flight
      // finish rather than fail against services that are stopping.
      await sleep(1_000);
      if (nc && !nc.isClosed()) await nc.close();
      for (const stop of stops.splice(0).reverse()) {
        await stop().catch((err) => log(`stopping failed: ${err.message}`));
      }
      rmSync(dir, { recursive: true, force: true });
    },
    /** Pids of every process of the stack, by name: the servers, the services and the baseline. */
    processIds() {
      const pids = new Map([...services].map(([name, service]) => [name, service.pid]));
      if (stack.nats) pids.set('nats-server', stack.nats.pid);
      if (stack.ferret) pids.set('ferretdb', stack.ferret.pid);
      return pids;
    },
    /** Throws if a service died: its figures would be meaningless. */
    assertRunning() {
      for (const service of services.values()) {
        if (!service.running) throw new Error(`${service.name} exited unexpectedly:\n${service.output()}`);
      }
    },
  };

  try {
    // Each service as its own NATS identity, with its grant, as deployed; the bench's own client may do anything.
    const natsAuth = testNatsAuth();
    const nats = await startNatsServer({
      binary: ensureTool('nats-server'),
      dir: join(dir, 'nats'),
      config: natsAuth.config,
    });
    stops.push(() => nats.stop());
    const ferret = await startFerretDb({ binary: ensureTool('ferretdb'), dir: join(dir, 'ferretdb') });
    stops.push(() => ferret.stop());

    const port = await freePort();
    const reposDir = join(dir, 'repos');
    mkdirSync(reposDir);
    const dbPrefix = 'bench';
    const env = {
      ...process.env,
      NATS_URL: nats.url,
      MONGO_URL: ferret.url,
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
      // Runs held for the read benchmarks are admitted for a harness no runner serves (lib/runs.mjs).
      HARNESSES: 'codex,bench',
    };
    for (const name of SERVICE_NAMES) {
      const nodeArgs = profile.includes(name) ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];
      const service = startNode(name, join(root, 'services', name, 'dist', 'main.js'), {
        env: { ...env, NATS_NKEY_SEED: natsAuth.keys[name].seed, ...(name === 'runner' ? runnerEnv : {}) },
        nodeArgs,
      });
      services.set(name, service);
      stops.push(() => service.stop());
    }

    const baselinePort = await freePort();
    const baseline = startNode('baseline', join(root, 'bench', 'lib', 'baseline-server.mjs'), {
      // It stands in for the gateway, so it connects as the gateway.
      env: { ...env, NATS_NKEY_SEED: natsAuth.keys.gateway.seed, PORT: String(baselinePort) },
      nodeArgs: profile.includes('baseline') ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
    });
    services.set('baseline', baseline);
    stops.push(() => baseline.stop());

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
    await waitUntil('runner', async () => Boolean(await jsm.consumers.info(STREAM_NAMES.runJobs, RUNNER_CONSUMER)));
    stack.assertRunning();

    const key = createApiKey(env, 'bench');
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    createBareRepo(reposDir, 'bench', { files: { 'README.md': '# Bench\n' } });
    const repos = await (await fetch(`${base}/v1/repohost/repositories`, { headers })).json();
    const repositoryId = repos.repositories[0].repository_id;

    /** Replaces the runner with one started with `extra` on top of its settings; resolves once it consumes. */
    stack.restartRunner = async (extra = {}) => {
      const old = services.get('runner');
      await old.stop();
      const runner = startNode('runner', join(root, 'services', 'runner', 'dist', 'main.js'), {
        env: { ...env, NATS_NKEY_SEED: natsAuth.keys.runner.seed, ...runnerEnv, ...extra },
      });
      services.set('runner', runner);
      stops.push(() => runner.stop());
      await waitUntil('runner', async () => {
        if (!runner.running) throw new Error(`the runner exited:\n${runner.output()}`);
        const info = await jsm.consumers.info(STREAM_NAMES.runJobs, RUNNER_CONSUMER);
        return info.num_waiting > 0;
      });
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
      ferret,
      dbPrefix,
      repositoryId,
    });
  } catch (err) {
    for (const service of services.values()) if (!service.running) log(`${service.name}: ${service.output()}`);
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
