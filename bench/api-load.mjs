#!/usr/bin/env node
// Quick local load check of the API's read paths, through the real gateway → NATS → runs →
// FerretDB / JetStream: GET /v1/runs/{id}, and event pages at the head and at the tail of a run
// with 100,000 events. Loopback only; bounded in time. Needs a build (`npm run build`).
//
//   node bench/api-load.mjs [--events 100000] [--seconds 10] [--connections 10]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { rpc } from '@threadwork/contracts';
import { connectNats, createLogger, request } from '@threadwork/platform';
import { spawnGuarded, startFerretDb, startNatsServer } from '../deploy/local/servers.mjs';
import { ensureTool } from '../deploy/local/tools.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '100000' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '10' },
  },
});
const EVENTS = Number(values.events);
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const SERVICES = ['runs', 'repohost', 'review', 'threads', 'gateway'];

const say = (line) => process.stderr.write(`load-check: ${line}\n`);
const dir = mkdtempSync(join(tmpdir(), 'threadwork-load-'));
const stops = [];

async function main() {
  const nats = await startNatsServer({ binary: ensureTool('nats-server'), dir: join(dir, 'nats') });
  stops.push(() => nats.stop());
  const ferret = await startFerretDb({ binary: ensureTool('ferretdb'), dir: join(dir, 'ferretdb') });
  stops.push(() => ferret.stop());

  const port = 18000 + Math.floor(Math.random() * 1000);
  const reposDir = join(dir, 'repos');
  mkdirSync(reposDir);
  const env = {
    ...process.env,
    NATS_URL: nats.url,
    MONGO_URL: ferret.url,
    MONGO_DB_PREFIX: 'load',
    REPOHOST_LOCAL_DIR: reposDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    // The per-key limit would otherwise be what this measures.
    RATE_LIMIT_PER_SECOND: '1000000000',
    RATE_LIMIT_BURST: '1000000000',
  };
  for (const name of SERVICES) {
    const child = spawnGuarded(process.execPath, [join(root, 'services', name, 'dist', 'main.js')], {
      env,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    stops.push(
      () =>
        new Promise((done) => {
          if (child.exitCode !== null) return done();
          child.once('exit', done);
          child.kill('SIGTERM');
        }),
    );
  }
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const ok = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    if (i > 300) throw new Error('gateway not ready');
    await new Promise((r) => setTimeout(r, 100));
  }

  const admin = spawnSync(
    process.execPath,
    [join(root, 'services', 'gateway', 'dist', 'admin.js'), 'keys', 'create', '--user', 'load'],
    { env, encoding: 'utf8' },
  );
  const key = admin.stdout.trim().split('\n').at(-1);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };

  const work = join(dir, 'work');
  mkdirSync(work);
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: work });
  execFileSync(
    'git',
    ['-c', 'user.name=load', '-c', 'user.email=load@example.invalid', 'commit', '-q', '--allow-empty', '-m', 'init'],
    { cwd: work },
  );
  execFileSync('git', ['clone', '-q', '--bare', work, join(reposDir, 'load.git')]);
  const repos = await (await fetch(`${base}/v1/repohost/repositories`, { headers })).json();
  const repositoryId = repos.repositories[0].repository_id;
  const created = await (
    await fetch(`${base}/v1/threads`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ repository_id: repositoryId, prompt: 'load' }),
    })
  ).json();
  const runId = created.run_id;

  // Stand in for the runner: claim the run and write its log through the runs service's API.
  const nc = await connectNats({
    servers: nats.url,
    name: 'load-check',
    logger: createLogger({ service: 'load', level: 'silent' }),
  });
  const { attempt } = await request(nc, rpc.runs.claim, { run_id: runId, runner_id: 'load-check' });
  await request(nc, rpc.runs.transition, { run_id: runId, attempt, to: 'starting' });
  await request(nc, rpc.runs.transition, { run_id: runId, attempt, to: 'running' });
  say(`appending ${EVENTS} events to ${runId}…`);
  const started = Date.now();
  let sequences = [];
  for (let i = 0; i < EVENTS; i += 500) {
    const events = Array.from({ length: Math.min(500, EVENTS - i) }, (_, j) => ({
      key: `e${i + j}`,
      chunk: { type: 'command.output', item_id: 'c1', delta: `line ${i + j} of a long build log\n` },
    }));
    ({ sequences } = await request(nc, rpc.runs.append, { run_id: runId, attempt, events }, { timeoutMs: 30_000 }));
  }
  const appendSeconds = (Date.now() - started) / 1000;
  await nc.drain();
  const tailFrom = sequences.at(-100);

  const targets = [
    ['GET /v1/runs/{id}', `/v1/runs/${runId}`],
    ['events page, head (limit 100)', `/v1/runs/${runId}/events?from=1&limit=100`],
    [`events page, tail (limit 100, from ${tailFrom})`, `/v1/runs/${runId}/events?from=${tailFrom}&limit=100`],
    ['GET /healthz', '/healthz'],
  ];
  const rows = [];
  for (const [name, path] of targets) {
    const probe = await fetch(`${base}${path}`, { headers });
    if (!probe.ok) throw new Error(`${name}: ${probe.status} ${await probe.text()}`);
    const result = await autocannon({ url: `${base}${path}`, headers, connections: CONNECTIONS, duration: SECONDS });
    rows.push({
      name,
      rps: result.requests.average,
      p50: result.latency.p50,
      p99: result.latency.p99,
      errors: result.errors + result.non2xx,
    });
  }

  const out = (line) => process.stdout.write(`${line}\n`);
  out(
    `Threadwork API load check — ${new Date().toISOString()} — ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}`,
  );
  out(
    `${EVENTS} events appended in ${appendSeconds.toFixed(1)} s (${Math.round(EVENTS / appendSeconds)} events/s, batches of 500); ${CONNECTIONS} connections, ${SECONDS} s each`,
  );
  out('');
  out(`| path | req/s | p50 ms | p99 ms | errors |`);
  out(`|---|---:|---:|---:|---:|`);
  for (const r of rows) out(`| ${r.name} | ${Math.round(r.rps)} | ${r.p50} | ${r.p99} | ${r.errors} |`);
}

try {
  await main();
} finally {
  for (const stop of stops.reverse()) await stop();
  rmSync(dir, { recursive: true, force: true });
}
