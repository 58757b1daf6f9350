import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { RunJob } from '@threadwork/contracts';
import { createLogger } from '@threadwork/platform';
import { createBareRepo } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTime } from '../harness/processes.js';
import { LocalSandboxProvider } from './local.js';

// Runners sharing a disk share its sandboxes: the harness process serving one is recorded with it,
// so that the next runner to start one there can stop it first (it may belong to a runner that is
// frozen rather than dead, and Codex lets one process at a time write a conversation).

const dir = mkdtempSync(join(tmpdir(), 'threadwork-local-sandbox-'));
const provider = new LocalSandboxProvider({
  root: join(dir, 'sandboxes'),
  logger: createLogger({ service: 'test', level: 'silent' }),
  publish: async () => {},
});
const children: ChildProcess[] = [];

function job(threadId: string): RunJob {
  return {
    run_id: `run_${threadId}`,
    thread_id: threadId,
    project_id: 'prj_1',
    owner_id: 'usr_1',
    message_id: 'msg_1',
    prompt: 'hello',
    harness: 'codex',
    model: 'm',
    reasoning_effort: 'medium',
    collaboration_mode: 'default',
    repositories: [
      {
        project_repository_id: 'prp_1',
        repository_id: 1,
        full_name: 'local/app',
        branch: 'main',
        clone_url: pathToFileURL(join(dir, 'repos', 'app.git')).href,
      },
    ],
  };
}

/** Stands in for a harness process: a process group of its own, with a child below it. */
function harness(): ChildProcess {
  const child = spawn('sh', ['-c', 'sleep 60 & wait'], { detached: true, stdio: 'ignore' });
  children.push(child);
  return child;
}

const gone = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

beforeAll(() => {
  createBareRepo(join(dir, 'repos'), 'app');
});
afterAll(() => {
  for (const child of children) if (!gone(child)) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

describe.runIf(process.platform === 'linux')('the harness recorded with a local sandbox', () => {
  it('is stopped by the next runner to start one, even frozen', async () => {
    const sandbox = await provider.prepare(job('thr_frozen'));
    const old = harness();
    await provider.rememberSession(sandbox, 'session-1', old.pid);
    process.kill(old.pid as number, 'SIGSTOP');

    // Another runner on this disk, about to start its own process for the sandbox.
    const again = await provider.prepare(job('thr_frozen'));
    expect(again.sessionId).toBe('session-1');
    expect(await provider.stopHarness(again)).toBe(true);
    expect(startTime(old.pid as number)).toBeNull();
    // Nothing left to stop the second time.
    expect(await provider.stopHarness(again)).toBe(false);
  });

  it('is left alone when its pid now names another process', async () => {
    const sandbox = await provider.prepare(job('thr_reused'));
    const other = harness();
    await provider.rememberSession(sandbox, 'session-2', other.pid);
    // The recorded process is long gone and its pid was reused: same pid, another start time.
    const stateFile = join(sandbox.dir, 'threadwork.json');
    const state = JSON.parse(readFileSync(stateFile, 'utf8')) as { harness: { start_time: string } };
    state.harness.start_time = String(Number(state.harness.start_time) - 1);
    writeFileSync(stateFile, JSON.stringify(state));

    expect(await provider.stopHarness(sandbox)).toBe(false);
    expect(gone(other)).toBe(false);
    expect(startTime(other.pid as number)).not.toBeNull();
  });

  it('records no process when none runs', async () => {
    const sandbox = await provider.prepare(job('thr_none'));
    await provider.rememberSession(sandbox, 'session-3');
    expect((await provider.find('thr_none'))?.sessionId).toBe('session-3');
    expect(await provider.stopHarness(sandbox)).toBe(false);
  });
});
