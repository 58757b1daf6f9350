// Starting the pinned servers as child processes: shared by the local stack (`npm start`) and the
// test setup (libs/testing). Each server is stopped by its pid, never by name. Dependency-free.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const SETPRIV = '/usr/bin/setpriv';

/**
 * spawn(), but on Linux the child gets SIGTERM when this process dies, even by SIGKILL (through
 * util-linux `setpriv --pdeathsig`, which then execs the command: the pid stays the server's). So a
 * crashed test run or stack never leaves servers behind. The child gets a process group of its
 * own, so a Ctrl-C in the terminal reaches only us, and we stop children in order (services drain
 * before the servers they use go away) instead of everything at once.
 */
export function spawnGuarded(command, args, options) {
  const opts = { ...options, detached: true };
  if (process.platform === 'linux' && existsSync(SETPRIV)) {
    return spawn(SETPRIV, ['--pdeathsig', 'SIGTERM', '--', command, ...args], opts);
  }
  return spawn(command, args, opts);
}

function watchExit(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null)
      resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

function captureOutput(child, onLine) {
  let out = '';
  const keep = (chunk) => {
    const text = chunk.toString();
    out = (out + text).slice(-8_000);
    if (onLine) for (const line of text.split('\n')) if (line.trim()) onLine(line);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return () => out;
}

async function waitFor(what, child, timeoutMs, probe, output) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${what} exited before it was ready (exit ${child.exitCode ?? child.signalCode}):\n${output()}`);
    }
    const value = probe();
    if (value !== undefined) return value;
    await sleep(25);
  }
  child.kill('SIGKILL');
  throw new Error(`${what} was not ready within ${timeoutMs} ms:\n${output()}`);
}

function handle(child, url, exited) {
  return {
    url,
    pid: child.pid,
    port: Number(new URL(url).port),
    exited,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      process.kill(child.pid, signal);
      const timer = setTimeout(
        () => child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'),
        5_000,
      );
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * nats-server with JetStream, file storage under `dir`, on loopback (`port` -1 picks a free one).
 * `config`, when given, is the text of a configuration file (its `authorization`: who may connect
 * and do what), written to `dir` readable by its owner only.
 */
export async function startNatsServer({ binary, dir, port = -1, onLine, config }) {
  mkdirSync(dir, { recursive: true });
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', join(dir, 'jetstream'), '--ports_file_dir', dir];
  if (config !== undefined) {
    const file = join(dir, 'nats.conf');
    writeFileSync(file, config, { mode: 0o600 });
    args.push('-c', file);
  }
  const child = spawnGuarded(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const output = captureOutput(child, onLine);
  const exited = watchExit(child);
  const portsFile = () => join(dir, `nats-server_${child.pid}.ports`);
  const url = await waitFor(
    'nats-server',
    child,
    30_000,
    () => {
      if (!existsSync(portsFile()) || !/Server is ready/.test(output())) return undefined;
      // The server may still be writing it: an empty or cut file is read again on the next look.
      try {
        return JSON.parse(readFileSync(portsFile(), 'utf8')).nats[0];
      } catch {
        return undefined;
      }
    },
    output,
  );
  return handle(child, url, exited);
}

/**
 * FerretDB (SQLite files under `dir`) through our launcher (`port` 0 picks a free one). Its stdin is
 * a pipe from this process: if we die without cleaning up, the pipe closes and it exits too.
 */
export async function startFerretDb({ binary, dir, port = 0, onLine }) {
  mkdirSync(dir, { recursive: true });
  const uriFile = join(dir, `uri-${process.pid}-${Date.now()}`);
  const args = ['-listen', `127.0.0.1:${port}`, '-dir', join(dir, 'db'), '-uri-file', uriFile, '-exit-on-stdin-eof'];
  const child = spawnGuarded(binary, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  const output = captureOutput(child, onLine);
  const exited = watchExit(child);
  const url = await waitFor(
    'ferretdb',
    child,
    30_000,
    () => (existsSync(uriFile) ? readFileSync(uriFile, 'utf8').trim() : undefined),
    output,
  );
  return handle(child, url, exited);
}
