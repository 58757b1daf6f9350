import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { waitFor } from '@threadwork/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { alive, root, type StackFile } from '../support/process-stack.js';

// Stopping the local stack, every way it gets stopped: SIGTERM to `npm start`, SIGKILL of
// `npm start`, a stop with a run in the middle of its turn, a stop after NATS or the database died
// under it, and a stop while nothing reads its output. Each time, every process the stack started —
// servers, services, the runner's harnesses — is gone within 5 s of the stack's own exit.

const SURVIVOR_GRACE_MS = 5_000;
// Hang guards, not budgets.
const READY_GUARD_MS = 180_000;
const EXIT_GUARD_MS = 90_000;

interface Started {
  child: ChildProcess;
  dataDir: string;
  port: number;
  env: NodeJS.ProcessEnv;
  output(): string;
  exited: Promise<void>;
}

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const clean of cleanups.splice(0)) clean();
});

/** `npm start` (builds first, so slower) or the stack script itself, in demo mode, on a fresh data dir. */
async function start(how: 'npm' | 'script'): Promise<Started> {
  const dataDir = mkdtempSync(join(tmpdir(), 'threadwork-stopping-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    THREADWORK_DATA_DIR: dataDir,
    // Any free port, picked by the stack (again, should another process take it first).
    PORT: '0',
    THREADWORK_DEMO: '1',
  };
  delete env.NATS_URL;
  delete env.MONGO_URL;
  const [command, args] =
    how === 'npm' ? ['npm', ['start', '--silent']] : [process.execPath, [join(root, 'deploy', 'local', 'stack.mjs')]];
  const child = spawn(command, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const started: Started = { child, dataDir, port: 0, env, output: () => output, exited };
  cleanups.push(() => {
    for (const pid of tree(child.pid!)) kill(pid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });
  const deadline = Date.now() + READY_GUARD_MS;
  while (!/ready: /.test(output)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the stack did not become ready:\n${output}`);
    await sleep(100);
  }
  started.port = Number(new URL(stackFile(started).gatewayUrl).port);
  return started;
}

function kill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** The process and all its descendants, read from /proc. */
function tree(pid: number): number[] {
  const all = [pid];
  for (let i = 0; i < all.length; i++) {
    const parent = all[i]!;
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${parent}/task`);
    } catch {
      continue;
    }
    for (const task of tasks) {
      try {
        const children = readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8').trim();
        if (children) all.push(...children.split(/\s+/).map(Number));
      } catch {
        // the task ended while we looked
      }
    }
  }
  return [...new Set(all)];
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
  } catch {
    return '';
  }
}

function stackFile(stack: Started): StackFile {
  return JSON.parse(readFileSync(join(stack.dataDir, 'stack.json'), 'utf8')) as StackFile;
}

function pidOf(stack: Started, name: string): number {
  const found = stackFile(stack).processes.find((p) => p.name === name);
  if (!found) throw new Error(`no ${name} in stack.json`);
  return found.pid;
}

async function api(stack: Started, key: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`http://127.0.0.1:${stack.port}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** A thread on a new, empty repository; resolves with its run id once the run reached `until`. */
/** An API key for `login`, from the admin CLI as a user of the stack would get one. */
function apiKey(stack: Started, login: string): string {
  const created = spawnSync(
    process.execPath,
    [join(root, 'services', 'gateway', 'dist', 'admin.js'), 'keys', 'create', '--user', login],
    { cwd: root, env: stack.env, encoding: 'utf8' },
  );
  expect(created.status, created.stderr).toBe(0);
  return created.stdout.trim().split('\n').at(-1)!;
}

async function runThread(stack: Started, until: (status: string) => boolean, mode?: string): Promise<string> {
  const key = apiKey(stack, 'alice');
  spawnSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', join(stack.dataDir, 'repos', 'demo.git')]);
  const { repositories } = (await api(stack, key, '/v1/repohost/repositories')) as {
    repositories: { repository_id: number }[];
  };
  const thread = await api(stack, key, '/v1/threads', {
    repository_id: repositories[0]!.repository_id,
    prompt: 'Add a changelog',
    ...(mode ? { collaboration_mode: mode } : {}),
  });
  const runId = String(thread.run_id);
  await waitFor(
    `run ${runId} to settle`,
    async () => until(String((await api(stack, key, `/v1/runs/${runId}`)).status)),
    EXIT_GUARD_MS,
  );
  return runId;
}

/**
 * Everything the stack started, taken just before the stop (the harness of a warm session
 * included), must be gone within SURVIVOR_GRACE_MS of the stack's own exit.
 */
async function expectNothingSurvives(stack: Started, pids: number[]): Promise<void> {
  await Promise.race([
    stack.exited,
    sleep(EXIT_GUARD_MS).then(() => {
      throw new Error(`the stack did not exit:\n${stack.output().slice(-4_000)}`);
    }),
  ]);
  const deadline = Date.now() + SURVIVOR_GRACE_MS;
  let survivors = pids.filter(alive);
  while (survivors.length > 0 && Date.now() < deadline) {
    await sleep(100);
    survivors = survivors.filter(alive);
  }
  expect(
    survivors.map((pid) => `${pid} ${commandOf(pid)}`),
    stack.output().slice(-4_000),
  ).toEqual([]);
}

function harnessesIn(pids: number[]): number[] {
  return pids.filter((pid) => / app-server/.test(commandOf(pid)));
}

describe('stopping the local stack', () => {
  it('SIGTERM to npm start, with a warm harness: everything stops', async () => {
    const stack = await start('npm');
    await runThread(stack, (status) => status === 'completed');
    const pids = tree(stack.child.pid!);
    expect(harnessesIn(pids).length, 'the session is kept warm').toBeGreaterThan(0);
    stack.child.kill('SIGTERM');
    await expectNothingSurvives(stack, pids);
  });

  it('SIGKILL of npm start: what it started notices and stops', async () => {
    const stack = await start('npm');
    await runThread(stack, (status) => status === 'completed');
    const pids = tree(stack.child.pid!);
    stack.child.kill('SIGKILL');
    // npm is gone at once; the rest must follow on their own.
    await expectNothingSurvives(stack, pids);
    expect(stack.output()).toContain('the process that started us is gone');
  });

  it('SIGTERM with a run waiting on its agent: the runner hands the job back and stops its harness', async () => {
    const stack = await start('script');
    await runThread(stack, (status) => status === 'waiting_for_input', 'plan');
    const pids = tree(stack.child.pid!);
    expect(harnessesIn(pids).length).toBeGreaterThan(0);
    stack.child.kill('SIGTERM');
    await expectNothingSurvives(stack, pids);
    expect(stack.output()).toMatch(/runner\s+info\s+stopped/);
  });

  for (const server of ['nats-server', 'ferretdb']) {
    it(`${server} dies under the stack: the stack stops, every service exits without it`, async () => {
      const stack = await start('script');
      await runThread(stack, (status) => status === 'completed');
      const pids = tree(stack.child.pid!);
      process.kill(pidOf(stack, server), 'SIGKILL');
      await expectNothingSurvives(stack, pids);
      expect(stack.output()).toContain(`${server} exited unexpectedly; stopping the stack`);
      for (const service of ['gateway', 'runner', 'threads', 'runs']) {
        expect(stack.output()).toMatch(new RegExp(`${service}\\s+\\S+\\s+(stopped|shutdown deadline passed)`));
      }
    });
  }

  it('SIGTERM while nothing reads its output: no one blocks on a full log pipe', async () => {
    const stack = await start('script');
    const runId = await runThread(stack, (status) => status === 'completed');
    stack.child.stdout!.pause();
    stack.child.stderr!.pause();
    // Enough log lines to fill every pipe between the services and us several times over.
    const key = apiKey(stack, 'bob');
    for (let i = 0; i < 2_000; i++) {
      const res = await fetch(`http://127.0.0.1:${stack.port}/v1/runs/${runId}?padding=${'x'.repeat(1_000)}`, {
        headers: { authorization: `Bearer ${key}` },
      });
      await res.arrayBuffer();
    }
    const pids = tree(stack.child.pid!);
    stack.child.kill('SIGTERM');
    await expectNothingSurvives(stack, pids);
  });
});
