import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ControlAppliedEvent, rpc } from '@threadwork/contracts';
import { loadConfig, request } from '@threadwork/platform';
import { agent } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { descendants } from '../src/harness/processes.js';
import { RunnerConfig, startRunner } from '../src/index.js';
import {
  admitRun,
  alive,
  chunks,
  domainOf,
  harnessesOf,
  isSubsequence,
  readLog,
  shape,
  startAgentStack,
  waitFor,
  waitForStatus,
  waitForTerminal,
  type AgentStack,
} from './helpers.js';
import { startRunnerProcess } from './support/runner-process.js';

// What a user does to a live run — steer it, cancel it — and a runner killed under it, with each
// harness from one table of cases: the real binaries, reached through the runs service's signals.

const { agentTurn, say, shell } = agent;

const STEER_TEXT = 'Actually, please also write tests.';
/** A command that runs until it is killed; Claude Code refuses a bare long `sleep`. */
const LONG_COMMAND = 'node -e "setTimeout(() => {}, 60000)"';

const scripts = new Map<string, agent.AgentScript>([
  [
    'STEER',
    // Claude Code takes a steer at the next tool result, Codex at once: a command makes room for both.
    (req) =>
      req.lastUserText === STEER_TEXT
        ? [say('Adjusted course: writing tests too.')]
        : req.outputsSinceLastUser.length === 0
          ? [say('Working on it…'), shell('for i in $(seq 1 50); do sleep 0.1; done; echo waited')]
          : { actions: [say('Still working…')], delayMs: 20_000 },
  ],
  ['CANCEL', agentTurn([[shell(LONG_COMMAND)], [say('waited')]])],
  [
    'RECOVER',
    // The first attempt hangs in the model; the attempt after the crash, which resumed the
    // conversation and so holds the prompt twice, does the work.
    (req) => {
      if (req.userTexts.filter((t) => t.startsWith('RECOVER')).length < 2) {
        return { actions: [say('working…')], delayMs: 60_000 };
      }
      if (req.outputsSinceLastUser.length === 0) return [shell('echo recovered > recovered.txt')];
      return [say('Recovered and done.')];
    },
  ],
]);

/** The long command the agent started, among the harness's descendants. */
function longCommandUnder(pid: number): number | undefined {
  return descendants(pid).find((child) => {
    try {
      return readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('setTimeout');
    } catch {
      return false;
    }
  });
}

describe.each(agent.HARNESS_NAMES)('controls of a live run with %s', (harness) => {
  let stack: AgentStack;
  let crashed: ChildProcess | undefined;
  beforeAll(async () => {
    stack = await startAgentStack(harness, scripts, { runs: { JOB_ACK_WAIT_MS: '2000' } });
  });
  afterAll(async () => {
    if (crashed?.pid && alive(crashed.pid)) crashed.kill('SIGKILL');
    await stack?.stop();
  });

  it('steers a long turn: the harness takes it, controlApplied is published, the model sees the steer', async () => {
    const admitted = await admitRun(stack, 'STEER me while I work');
    await waitFor('the turn’s command to start', async () =>
      shape(await readLog(stack.nc, admitted.run.id)).includes('command.started'),
    );
    const controlId = await stack.recordSteer(admitted, STEER_TEXT);
    stack.signalSteer(admitted.run.id, controlId);

    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');
    const applied = domainOf(stack, 'control.applied', admitted.run.id);
    expect(applied).toHaveLength(1);
    expect(ControlAppliedEvent.parse(applied[0]?.data)).toMatchObject({
      control_id: controlId,
      run_id: admitted.run.id,
      thread_id: admitted.threadId,
    });
    const events = chunks(await readLog(stack.nc, run.id));
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'control.applied', control_id: controlId, kind: 'steer' }),
    );
    // The model was asked again with the steer after the prompt, in the same turn.
    const steered = stack.agent.requests.find((r) => r.lastUserText === STEER_TEXT);
    expect(steered?.userTexts).toEqual(['STEER me while I work', STEER_TEXT]);
    expect(events.filter((c) => c.type === 'message.completed').map((c) => c.text)).toContain(
      'Adjusted course: writing tests too.',
    );
  });

  it('cancels a run during a long command: cancelled, the harness and its command gone, the model not asked again', async () => {
    const admitted = await admitRun(stack, 'CANCEL me during a long command');
    await waitFor('the command to start', async () =>
      shape(await readLog(stack.nc, admitted.run.id)).includes('command.started'),
    );
    const pid = stack.runner.harnessPids().get(admitted.threadId) as number;
    expect(pid).toBeDefined();
    const command = await waitFor('the command to run', () => longCommandUnder(pid));

    const { requested } = await request(stack.nc, rpc.runs.cancel, {
      owner_id: admitted.owner,
      run_id: admitted.run.id,
    });
    expect(requested).toBe(true);
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('cancelled');
    await waitFor('the harness to exit', () => !alive(pid));
    await waitFor('its command to exit', () => !alive(command));
    expect(stack.agent.requests.filter((r) => r.lastUserText === 'CANCEL me during a long command')).toHaveLength(1);
    const log = shape(await readLog(stack.nc, run.id));
    expect(
      isSubsequence(log, ['run.status:running', 'command.started', 'run.status:cancelling', 'run.status:cancelled']),
    ).toBe(true);
    expect(log.filter((t) => t === 'run.status:cancelled')).toHaveLength(1);
  });

  it('survives a runner killed with SIGKILL: another runner resumes the session and completes attempt 1', async () => {
    await stack.runner.stop();
    crashed = await startRunnerProcess(stack.runnerEnv());
    const admitted = await admitRun(stack, 'RECOVER from a crash');
    await waitForStatus(stack, admitted.run.id, ['running']);
    await waitFor('the model to be asked', () =>
      stack.agent.requests.some((r) => r.lastUserText === 'RECOVER from a crash'),
    );
    // Killed before its session held the prompt, the harness would resume a conversation without it.
    await waitFor('the harness to record the prompt', () =>
      agent.recorded(join(stack.sandboxRoot, admitted.threadId), 'RECOVER from a crash'),
    );
    const crashedHarnesses = harnessesOf(stack.sandboxRoot, admitted.threadId);
    expect(crashedHarnesses.length).toBeGreaterThan(0);

    crashed.kill('SIGKILL');
    await waitFor('the crashed runner to be gone', () => !alive(crashed?.pid as number));
    // Its harness goes with it (started with a parent-death signal), before another takes over.
    for (const pid of crashedHarnesses) await waitFor('the crashed runner’s harness to exit', () => !alive(pid));
    stack.runner = await startRunner(loadConfig(RunnerConfig, stack.runnerEnv()));

    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');
    expect(run.attempt).toBe(1);
    const events = await readLog(stack.nc, run.id);
    const sequences = events.map((e) => e.sequence);
    expect(new Set(sequences).size).toBe(sequences.length);
    expect(sequences).toEqual([...sequences].sort((a, b) => a - b));
    const log = shape(events);
    expect(log.filter((t) => /^run\.status:(completed|failed|cancelled)$/.test(t))).toEqual(['run.status:completed']);
    const workspace = join(stack.sandboxRoot, admitted.threadId, 'app');
    expect(readFileSync(join(workspace, 'recovered.txt'), 'utf8')).toBe('recovered\n');
    // The resumed conversation: the prompt of attempt 0, then attempt 1's.
    const resumed = stack.agent.requests.find((r) => r.outputsSinceLastUser.length > 0 && r.userTexts.length === 2);
    expect(resumed?.userTexts).toEqual(['RECOVER from a crash', 'RECOVER from a crash']);
  });
});
