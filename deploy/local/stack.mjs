#!/usr/bin/env node
// The whole local stack in the foreground: NATS and FerretDB (data under THREADWORK_DATA_DIR,
// default ./.data) unless NATS_URL and MONGO_URL point elsewhere, then every service, with their
// JSON logs printed as readable lines. Ctrl-C or SIGTERM stops everything it started, by pid; so
// does the death of the process that started it, and nothing it started outlives it.
// Run through `npm start`, which builds first.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, fstatSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { isatty } from 'node:tty';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { createStack, root, SERVICES } from './launcher.mjs';
// Built by `npm start` before this script runs.
import {
  natsAuthorizationConfig,
  natsPublicKeyOf,
  natsServerUsers,
  newNatsKeys,
} from '../../libs/platform/dist/nats-auth.js';
import { NATS_IDENTITIES } from '../../libs/contracts/dist/nats-grants.js';

const dataDir = resolve(process.env.THREADWORK_DATA_DIR ?? join(root, '.data'));
// 0: a free port, picked by the launcher (again, should another process take it first) and printed
// once the gateway is ready.
const port = Number(process.env.PORT ?? 8080);
const stackFile = join(dataDir, 'stack.json');
const demo = ['1', 'true', 'yes'].includes(process.env.THREADWORK_DEMO ?? '');
const RUNNER_WITHHELD = ['MONGO_URL', 'MONGO_DB_PREFIX', 'MONGO_SERVER_SELECTION_TIMEOUT_MS', 'SESSION_SECRET'];
// Only the runner talks to a model, so only it is told the model keys.
const MODEL_KEYS = ['MODEL_API_KEY', 'CLAUDE_API_KEY'];
// The stack serves both harnesses unless told otherwise; threads, runs and the runner read this one
// value, so no runner waits for jobs runs never queues, nor a harness threads takes goes unserved.
const harnesses = process.env.HARNESSES ?? 'codex,claude-code';
/** Each harness the runner has an adapter for, with the variables of its model endpoint. */
const MODEL_ENDPOINTS = {
  codex: { url: 'MODEL_BASE_URL', key: 'MODEL_API_KEY' },
  'claude-code': { url: 'CLAUDE_BASE_URL', key: 'CLAUDE_API_KEY' },
};
// A service gets this long to stop after SIGTERM (its own deadline plus a margin), then SIGKILL.
const SERVICE_STOP_MS = Number(process.env.SHUTDOWN_TIMEOUT_MS ?? 10_000) + 2_000;
// Output held back while nothing reads ours; past it, lines are dropped and counted.
const OUTPUT_BUFFER_BYTES = 1024 * 1024;

/**
 * Our standard output, never blocking. Node writes to a pipe synchronously, so a reader that stops
 * reading (a pager, a stuck parent) would freeze us mid-line: we would stop reading the services'
 * logs, they would block in turn, and no one would act on SIGTERM any more. On a pipe, lines go
 * out through a non-blocking stream instead, queued up to OUTPUT_BUFFER_BYTES and dropped beyond.
 */
const out = (() => {
  const stat = fstatSync(1);
  if (!stat.isFIFO() && !stat.isSocket()) return { write: (text) => process.stdout.write(text), flush: async () => {} };
  const socket = new Socket({ fd: 1, readable: false, writable: true });
  let broken = false;
  let dropped = 0;
  socket.on('error', () => (broken = true));
  socket.on('drain', () => {
    if (dropped === 0) return;
    socket.write(`threadwork (${dropped} lines of output dropped while nothing read them)\n`);
    dropped = 0;
  });
  socket.unref();
  return {
    write(text) {
      if (broken) return;
      if (socket.writableLength > OUTPUT_BUFFER_BYTES) dropped += 1;
      else socket.write(text);
    },
    /** The last lines get a moment to go out before we exit, not more. */
    async flush(timeoutMs = 500) {
      const deadline = Date.now() + timeoutMs;
      while (!broken && socket.writableLength > 0 && Date.now() < deadline) await sleep(10);
    },
  };
})();

const color = isatty(1) ? (code, text) => `\x1b[${code}m${text}\x1b[0m` : (_code, text) => text;
const LEVEL_COLORS = { trace: 90, debug: 90, info: 32, warn: 33, error: 31, fatal: 31 };

function say(line) {
  out.write(`${color(1, 'threadwork')} ${line}\n`);
}

/** One readable line for a pino JSON line; anything else is printed as it came. */
function pretty(name, line) {
  let entry;
  try {
    entry = JSON.parse(line);
  } catch {
    return `${color(36, name.padEnd(9))} ${line}`;
  }
  const { time, level, msg, service: _service, pid: _pid, hostname: _hostname, ...rest } = entry;
  const when = typeof time === 'string' ? time.slice(11, 19) : '';
  const extra = Object.keys(rest).length ? ` ${color(90, JSON.stringify(rest))}` : '';
  return `${color(90, when)} ${color(36, name.padEnd(9))} ${color(LEVEL_COLORS[level] ?? 0, String(level ?? '').padEnd(5))} ${msg ?? ''}${extra}`;
}

let stack;
let stopping = false;

async function stopAll(code) {
  if (stopping) return;
  stopping = true;
  say('stopping…');
  await stack?.stop();
  rmSync(stackFile, { force: true });
  say('stopped');
  await out.flush();
  process.exit(code);
}

process.on('SIGINT', () => void stopAll(0));
process.on('SIGTERM', () => void stopAll(0));
// Started by a process that is now gone (killed without passing a signal on): stop, as for SIGTERM.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) void stopAll(0);
}, 250).unref();

/** What the servers print is left out but for their errors; the services' every line, readably. */
function printLine(proc, line) {
  if (proc.name === 'nats-server' && !/\[(ERR|WRN|FTL)\]/.test(line)) return;
  if (proc.name === 'ferretdb' && !/level=ERROR|panic/.test(line)) return;
  out.write(pretty(proc.name === 'nats-server' ? 'nats' : proc.name, line) + '\n');
}

function announce(proc) {
  if (proc.name === 'nats-server') say(`NATS with JetStream at ${proc.url} (data in ${join(dataDir, 'nats')})`);
  if (proc.name === 'ferretdb') {
    say(`FerretDB (MongoDB wire protocol on SQLite) at ${proc.url} (data in ${join(dataDir, 'ferretdb')})`);
  }
  if (proc.name !== SERVICES[0]) return;
  say(modelSummary());
}

/** Which served harnesses have a model endpoint (demo mode's answers both APIs), and what the others need. */
function modelSummary() {
  const served = harnesses
    .split(',')
    .map((h) => h.trim())
    .filter(Boolean);
  if (demo) {
    return `demo mode: agent replies of ${served.join(' and ')} are scripted (model "demo-scripted"); no model key is used`;
  }
  const parts = served.map((name) => {
    const { url, key } = MODEL_ENDPOINTS[name] ?? {};
    if (!url) return `${name} has no adapter in the runner, which refuses to start`;
    if (process.env[url]) return `${name} has a model endpoint (${url})`;
    return `${name} has no model endpoint: its runs will fail with model_not_configured (set ${url} and ${key}, or try THREADWORK_DEMO=1 npm start)`;
  });
  return `harnesses: ${parts.join('; ')}`;
}

/** Any process of the stack dying stops the stack. */
function exitedUnexpectedly(proc, { code, signal }) {
  if (stopping) return;
  const how = proc.kind === 'server' ? '' : ` (${signal ?? `exit ${code}`})`;
  say(`${proc.name} exited unexpectedly${how}; stopping the stack`);
  void stopAll(1);
}

async function waitReady(url, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !stopping) {
    try {
      const res = await fetch(url);
      if (res.ok) return true;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  return false;
}

async function main() {
  mkdirSync(dataDir, { recursive: true });
  // Every service connects to NATS as an identity of its own and may do only what its grant says.
  const natsKeys = process.env.NATS_URL ? null : localNatsKeys();

  const dbPrefix = process.env.MONGO_DB_PREFIX ?? 'threadwork';
  // Session cookies outlive a restart of the local stack: the secret is kept with its data, readable
  // only by its owner (the admin CLI signs cookies with it too).
  const secretFile = join(dataDir, 'session.secret');
  if (!process.env.SESSION_SECRET && !existsSync(secretFile)) {
    writeFileSync(secretFile, randomBytes(32).toString('base64url') + '\n', { mode: 0o600 });
  }
  const sessionSecret = process.env.SESSION_SECRET ?? readFileSync(secretFile, 'utf8').trim();
  const env = {
    ...process.env,
    MONGO_DB_PREFIX: dbPrefix,
    THREADWORK_DATA_DIR: dataDir,
    SESSION_SECRET: sessionSecret,
    REPOHOST_LOCAL_DIR: process.env.REPOHOST_LOCAL_DIR ?? join(dataDir, 'repos'),
    SANDBOX_ROOT: process.env.SANDBOX_ROOT ?? join(dataDir, 'sandboxes'),
    HOST: process.env.HOST ?? '127.0.0.1',
    HARNESSES: harnesses,
  };
  // Where a browser reaches the gateway (and the console): install sessions may return to the
  // console's setup page, and sign-in with GitHub (with an OAuth client configured) comes back here.
  // Repohost starts before the gateway, so a port not yet picked cannot be in it: unset unless given.
  const publicBaseUrl = process.env.PUBLIC_BASE_URL ?? (port ? `http://localhost:${port}` : undefined);
  if (publicBaseUrl) env.PUBLIC_BASE_URL = publicBaseUrl;
  if (demo) {
    // The runner plays a scripted model for both APIs; runs admitted meanwhile say so in their `model`.
    env.CODEX_MODEL = 'demo-scripted';
    env.CLAUDE_MODEL = 'demo-scripted';
  }
  mkdirSync(env.REPOHOST_LOCAL_DIR, { recursive: true });

  stack = createStack({
    dir: dataDir,
    nats: natsKeys ? { config: natsAuthorizationConfig(natsServerUsers(natsKeys)) } : { url: process.env.NATS_URL },
    ferret: process.env.MONGO_URL ? { url: process.env.MONGO_URL } : {},
    natsKeys,
    env,
    // The runner never uses the database or signs sessions, so it is told neither the database's
    // address nor the session secret (what a compromise of it could reach).
    // The model keys (passed through from our environment) go to the runner alone.
    services: SERVICES.map((role) =>
      role === 'runner'
        ? { role, withhold: RUNNER_WITHHELD }
        : { role, withhold: MODEL_KEYS, ...(role === 'gateway' ? { ports: [port] } : {}) },
    ),
    stopTimeoutMs: SERVICE_STOP_MS,
    onLine: printLine,
    onStart: announce,
    onExit: exitedUnexpectedly,
    onStopError: (proc, err) => say(`could not stop ${proc.name} (pid ${proc.pid}): ${err.message}`),
  });
  await stack.start();
  if (stopping) return;

  const gatewayPort = stack.process('gateway').port;
  const gatewayUrl = `http://localhost:${gatewayPort}`;
  writeFileSync(
    stackFile,
    JSON.stringify(
      {
        natsUrl: stack.env.NATS_URL,
        mongoUrl: stack.env.MONGO_URL,
        dbPrefix,
        gatewayUrl,
        pid: process.pid,
        processes: stack.processes.map(({ name, pid }) => ({ name, pid })),
      },
      null,
      2,
    ) + '\n',
  );

  if (await waitReady(`http://127.0.0.1:${gatewayPort}/readyz`, 60_000)) {
    say(`ready: ${color(1, gatewayUrl)}  (create an API key: npm run admin -- keys create --user <login>)`);
    const link = await localLoginLink(gatewayUrl);
    if (link) say(`open the console, signed in as ${LOCAL_USER} (the link works once, for 15 min): ${color(1, link)}`);
  } else if (!stopping) {
    say(`the gateway did not become ready on port ${gatewayPort} within 60 s; stopping`);
    await stopAll(1);
  }
}

/** Who the login link printed at start signs in; `npm run admin -- login-link --user <login>` makes others. */
const LOCAL_USER = 'local';

/**
 * A one-time login link for the local user, made by the admin CLI against this stack (its stack
 * file, not whatever database MONGO_URL names), the way Jupyter prints its token URL; null (and
 * why) when the CLI could not make one.
 */
async function localLoginLink(gatewayUrl) {
  const admin = join(root, 'services', 'gateway', 'dist', 'admin.js');
  const env = { ...process.env, THREADWORK_DATA_DIR: dataDir };
  delete env.MONGO_URL;
  delete env.MONGO_DB_PREFIX;
  try {
    const args = [admin, 'login-link', '--user', LOCAL_USER, '--origin', gatewayUrl];
    const { stdout } = await promisify(execFile)(process.execPath, args, { env, timeout: 30_000 });
    return stdout.trim().split('\n').at(-1) ?? null;
  } catch (err) {
    say(`no login link for ${LOCAL_USER}: ${String(err.stderr || err.message).trim()}`);
    return null;
  }
}

main().catch(async (err) => {
  say(`failed to start: ${err.message}`);
  await stopAll(1);
});

/**
 * The NATS keys of this stack's identities, made on first start and kept with its data (readable
 * by its owner only), so a restart keeps them; the admin CLI reads its own from there.
 */
function localNatsKeys() {
  const file = join(dataDir, 'nats-keys.json');
  if (existsSync(file)) {
    const keys = JSON.parse(readFileSync(file, 'utf8'));
    const complete = NATS_IDENTITIES.every((id) => keys[id] && natsPublicKeyOf(keys[id].seed) === keys[id].publicKey);
    if (complete) return keys;
    say(`${file} is incomplete or inconsistent; making new NATS keys`);
  }
  const keys = newNatsKeys();
  writeFileSync(file, JSON.stringify(keys, null, 2) + '\n', { mode: 0o600 });
  return keys;
}
