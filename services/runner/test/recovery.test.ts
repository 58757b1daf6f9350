import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '@threadwork/platform';
import { say, shell, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunnerConfig, startRunner } from '../src/index.js';
import {
  admitRun,
  alive,
  getRun,
  harnessesOf,
  readLog,
  shape,
  startStack,
  waitFor,
  waitForTerminal,
  type Stack,
} from './helpers.js';
import { startRunnerProcess } from './support/runner-process.js';

// A runner killed with SIGKILL mid-run (a crash): its job comes back after the ack wait, another
// runner claims the next attempt, resumes the Codex session in the surviving workspace and runs
// the turn again. The log stays one ordered log with one terminal event.

const ACK_WAIT_MS = '2000';

const scripts = new Map<string, FakeScript>([
  [
    'RECOVER',
    (req) => {
      // The first attempt hangs in the model; the attempt after the crash finishes the job.
      if (req.metadata.threadwork_attempt === '0') return { items: [say('working…')], delayMs: 60_000 };
      if (req.toolOutputsSinceLastUser.length === 0) return [shell('echo recovered > recovered.txt')];
      return [say('Recovered and done.')];
    },
  ],
]);

describe('a runner that crashes mid-run', () => {
  let stack: Stack;
  let crashed: ChildProcess | undefined;
  beforeAll(async () => {
    stack = await startStack(scripts, { runs: { JOB_ACK_WAIT_MS: ACK_WAIT_MS } });
    // Only the runner in its own process takes the first job.
    await stack.runner.stop();
  });
  afterAll(async () => {
    if (crashed?.pid && alive(crashed.pid)) crashed.kill('SIGKILL');
    await stack?.stop();
  });

  it.each([
    ['removed', (file: string) => rmSync(file)],
    ['empty', (file: string) => truncateSync(file, 0)],
    ['cut inside its first line', (file: string) => truncateSync(file, 40)],
  ])(
    'starts the turn over in a new session when the crashed one had recorded nothing to resume (rollout %s)',
    async (label, spoil) => {
      await stack.runner.stop();
      crashed = await startRunnerProcess(stack.runnerEnv());
      const prompt = `RECOVER what was never recorded (${label})`;
      const admitted = await admitRun(stack, prompt);
      await waitFor('the model to be asked', () => stack.fake.requests.some((r) => r.lastUserText === prompt));
      crashed.kill('SIGKILL');
      await waitFor('the crashed runner to be gone', () => !alive(crashed?.pid as number));
      // As when the runner dies the moment the turn begins, before Codex wrote the thread's rollout:
      // the workspace and the stored session id are there, the conversation is not.
      const home = join(stack.sandboxRoot, admitted.threadId, 'codex-home');
      const sessions = join(home, 'sessions');
      await waitFor(
        'the crashed runner’s harness to exit',
        () => harnessesOf(stack.sandboxRoot, admitted.threadId).length === 0,
      );
      // What the runner checks to tell "never recorded" apart: Codex names a thread's rollout after it.
      const { session_id } = JSON.parse(
        readFileSync(join(stack.sandboxRoot, admitted.threadId, 'threadwork.json'), 'utf8'),
      );
      const recorded = readdirSync(sessions, { recursive: true })
        .map(String)
        .filter((name) => name.endsWith(`-${session_id}.jsonl`));
      expect(recorded).toHaveLength(1);
      // As the runner died before Codex wrote it, or while it wrote its first line.
      spoil(join(sessions, recorded[0]!));
      stack.runner = await startRunner(loadConfig(RunnerConfig, stack.runnerEnv()));

      const run = await waitForTerminal(stack, admitted.run.id);
      expect(run.status, JSON.stringify(run.error)).toBe('completed');
      expect(run.attempt).toBe(1);
      // A new conversation: the turn's prompt once, not a resumed one holding it twice.
      const retried = stack.fake.requests.find(
        (r) => r.metadata.threadwork_attempt === '1' && r.userTexts.includes(prompt),
      );
      expect(retried?.userTexts).toEqual([prompt]);
      const log = shape(await readLog(stack.nc, run.id));
      expect(log.filter((t) => t.startsWith('run.status:completed'))).toHaveLength(1);
    },
  );

  it('fails the run runner_lost when the crashed runner’s workspace did not survive', async () => {
    await stack.runner.stop();
    crashed = await startRunnerProcess(stack.runnerEnv());
    const admitted = await admitRun(stack, 'RECOVER but the disk is gone');
    await waitFor('the model to be asked', () =>
      stack.fake.requests.some((r) => r.lastUserText === 'RECOVER but the disk is gone'),
    );
    crashed.kill('SIGKILL');
    await waitFor('the crashed runner to be gone', () => !alive(crashed?.pid as number));
    // Another machine, as far as the next runner can tell: the thread's sandbox is not on its disk.
    rmSync(join(stack.sandboxRoot, admitted.threadId), { recursive: true, force: true });
    stack.runner = await startRunner(loadConfig(RunnerConfig, stack.runnerEnv()));

    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('failed');
    expect(run.error?.code).toBe('runner_lost');
    expect(run.attempt).toBe(1);
    const log = shape(await readLog(stack.nc, run.id));
    expect(log.filter((t) => t.startsWith('run.status:failed'))).toHaveLength(1);
  });

  it('hands a run back when stopped gracefully: the next runner finishes it at once, the old harness is gone', async () => {
    // An ack wait far beyond this test's time: only a hand-back (a nak) brings the job back in time.
    await stack.runner.stop();
    await stack.nats.provision({ jobAckWaitMs: 10 * 60_000 });
    stack.runner = await startRunner(loadConfig(RunnerConfig, stack.runnerEnv()));
    const admitted = await admitRun(stack, 'RECOVER after a restart');
    await waitFor('the model to be asked', () =>
      stack.fake.requests.some((r) => r.lastUserText === 'RECOVER after a restart'),
    );
    const pid = stack.runner.harnessPids().get(admitted.threadId) as number;
    expect(pid).toBeDefined();
    await stack.runner.stop();
    expect(alive(pid)).toBe(false);
    expect((await getRun(stack, admitted.run.id)).terminal).toBe(false);

    stack.runner = await startRunner(loadConfig(RunnerConfig, stack.runnerEnv()));
    const run = await waitForTerminal(stack, admitted.run.id, 60_000);
    expect(run.status).toBe('completed');
    expect(run.attempt).toBe(1);
  });
});
