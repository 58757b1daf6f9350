import { join } from 'node:path';
import { agent } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createThread, logProblems, readLog, rounds, statusTrail, waitFor, waitForTerminal } from './support/api.js';
import { Cluster, commandLine, type ChaosUser } from './support/cluster.js';

// Fault 1: `kill -9` of the runner in the middle of a run, with a second runner up. The job comes
// back to the other runner after the ack wait; it claims the next attempt and either finishes the
// run or fails it `runner_lost` — never two terminal events, never a sequence twice. The same
// case runs through each harness, on one cluster that serves both.

const { say, shell } = agent;

const scripts = new Map<string, agent.AgentScript>([
  [
    'HANG',
    (req) => {
      // The first attempt is stuck in the model when its runner dies; the next one finishes. Neither
      // harness tells the model the attempt: the next one resumed the conversation, so it holds the
      // prompt twice.
      if (req.userTexts.filter((t) => t === req.lastUserText).length < 2) {
        return { actions: [say('working…')], delayMs: 60_000 };
      }
      if (req.outputsSinceLastUser.length === 0) return [shell('echo recovered > recovered.txt')];
      return [say('Recovered and done.')];
    },
  ],
]);

let cluster: Cluster;
let user: ChaosUser;
let repoId: number;

beforeAll(async () => {
  cluster = await Cluster.start({ runners: 2, agentScripts: scripts, harnesses: agent.HARNESS_NAMES });
  user = cluster.createUser();
  repoId = await cluster.addRepo(user);
});
afterAll(async () => {
  await cluster?.stop();
});

describe.each(agent.HARNESS_NAMES)('kill -9 of a runner mid-run with %s', (harness) => {
  it('the other runner takes the run over: one ordered log, one terminal event', async () => {
    for (let round = 0; round < rounds(2); round++) {
      const prompt = `HANG ${harness} round ${round}`;
      const thread = await createThread(cluster, user, { repository_id: repoId, prompt, harness });
      await waitFor('the model to be asked', () =>
        cluster.agent(harness).requests.some((r) => r.lastUserText === prompt),
      );
      // Killed before its session held the prompt, the harness would resume a conversation without it.
      await waitFor('the harness to record the prompt', () =>
        agent.recorded(join(cluster.sandboxRoot, thread.id), prompt),
      );
      const victim = await waitFor('the runner holding the run', () => cluster.runnerHolding(thread.id));
      const harnesses = cluster.harnessPids(victim.pid, thread.id);
      await victim.kill();
      // Its harness goes with it (parent-death signal).
      await waitFor(
        'the dead runner’s harness to exit',
        () => harnesses.every((pid) => commandLine(pid) === ''),
        10_000,
      );

      const run = await waitForTerminal(cluster, user, thread.run_id);
      const events = await readLog(cluster, user, thread.run_id);
      expect(logProblems(events), cluster.logs()).toEqual([]);
      expect(run.attempt).toBe(1);
      if (run.status === 'failed') {
        expect(run.error?.code).toBe('runner_lost');
      } else {
        expect(run.status).toBe('completed');
        expect(statusTrail(events).at(-1)).toBe('completed@1');
      }
      // What attempt 0 wrote before the crash is still there, before everything attempt 1 wrote.
      const trail = statusTrail(events);
      expect(trail.indexOf('running@0'), trail.join(' ')).toBeGreaterThanOrEqual(0);
      expect(trail.indexOf('running@0')).toBeLessThan(trail.findIndex((s) => s.endsWith('@1')));

      // Keep two runners up for the next round.
      await cluster.startRunner();
    }
  });
});
