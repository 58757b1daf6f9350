import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { MessageAccepted } from '@threadwork/contracts';
import { agent, uniqueId, RunDriver } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createThread, getRun, logProblems, readLog, statusTrail, waitFor, waitForTerminal } from './support/api.js';
import { Cluster, commandLine, descendantsOf, type ChaosUser, type ServiceProcess } from './support/cluster.js';

// Fault: a runner frozen past its lease (SIGSTOP of its whole process tree, as when a container
// is paused or a VM stalls) while another runner takes its run over, then thawed (SIGCONT). The
// thawed runner still believes it holds attempt 0. The run must be the second runner's (its log,
// its status, its work on the thread branch); whatever attempt 0 would still write is refused;
// the frozen harness must not act again (it holds the harness's session, which the takeover
// needs, and its model answer is waiting in its socket: a command writing `zero.txt`); and the
// thawed runner must leave the run, keep no stale harness, and carry on serving.
//
// Two ways to thaw, alternating by round: after the takeover has finished the run, and while the
// takeover is still mid-turn (the run live at a newer attempt, in the workspace the frozen
// harness would write to). Each harness plays the same case, on one cluster that serves both.

const { say, shell } = agent;

const ROUNDS = Number(process.env.CHAOS_ROUNDS ?? 2);

/** Gates the fake model's answers, by prompt: the test decides when each attempt's reply goes out. */
interface Gates {
  /** Attempt 0's answer (its runner is frozen by then, so the answer waits in its socket). */
  attempt0: Promise<void>;
  release0(): void;
  /** Set once attempt 0's answer has been written to the frozen harness's connection. */
  answered0: boolean;
  /** Attempt 1's first answer (held while the frozen runner is thawed mid-takeover). */
  attempt1: Promise<void>;
  release1(): void;
}
const gates = new Map<string, Gates>();

function gatesFor(prompt: string): Gates {
  let release0 = () => {};
  let release1 = () => {};
  const attempt0 = new Promise<void>((resolve) => (release0 = resolve));
  const attempt1 = new Promise<void>((resolve) => (release1 = resolve));
  const g: Gates = { attempt0, release0, answered0: false, attempt1, release1 };
  gates.set(prompt, g);
  return g;
}

/**
 * Whether a request is the takeover's. Neither harness tells the model the attempt: the takeover
 * resumed attempt 0's conversation, so it holds the prompt twice.
 */
const byTakeover = (req: agent.AgentRequest, prompt: string) => req.userTexts.filter((t) => t === prompt).length > 1;

const scripts = new Map<string, agent.AgentScript>([
  [
    'FROZEN',
    async (req) => {
      const prompt = req.userTexts[0] ?? '';
      const g = gates.get(prompt);
      if (!g) return [say('unknown round')];
      const step = req.outputsSinceLastUser.length;
      if (!byTakeover(req, prompt)) {
        if (step > 0) return [say('ZERO-LATE: done')];
        // A slow model: the answer comes once the runner asking is frozen, and is read when it thaws.
        await g.attempt0;
        g.answered0 = true;
        return [say('ZERO-LATE: writing'), shell('echo zero > zero.txt')];
      }
      if (step > 0) return [say('ONE: done')];
      await g.attempt1;
      return [shell('echo one > one.txt')];
    },
  ],
  [
    'AFTER',
    (req) => (req.outputsSinceLastUser.length === 0 ? [shell('echo after > after.txt')] : [say('AFTER: done')]),
  ],
]);

let cluster: Cluster;
let user: ChaosUser;
let repoId: number;
const repoName = uniqueId('paused');

beforeAll(async () => {
  cluster = await Cluster.start({ runners: 2, agentScripts: scripts, harnesses: agent.HARNESS_NAMES });
  user = cluster.createUser();
  repoId = await cluster.addRepo(user, repoName);
});
afterAll(async () => {
  // Nothing stays frozen behind a failed round.
  for (const r of cluster?.runners() ?? []) signalTree(r.pid, 'SIGCONT');
  await cluster?.stop();
});

/** SIGSTOP or SIGCONT of a process and everything below it, as freezing its container would. */
function signalTree(pid: number, sig: 'SIGSTOP' | 'SIGCONT'): void {
  for (const p of [pid, ...descendantsOf(pid)]) {
    try {
      process.kill(p, sig);
    } catch {
      // Gone meanwhile.
    }
  }
}

/** The files on the thread branch of the bare repository, or null while there is no such branch. */
function branchFiles(threadId: string): string[] | null {
  const res = spawnSync(
    'git',
    ['--git-dir', join(cluster.reposDir, `${repoName}.git`), 'ls-tree', '-r', '--name-only', `threadwork/${threadId}`],
    { encoding: 'utf8' },
  );
  return res.status === 0 ? res.stdout.split('\n').filter(Boolean).sort() : null;
}

async function ready(runner: ServiceProcess): Promise<boolean> {
  const res = await fetch(`http://127.0.0.1:${runner.env.HEALTH_PORT}/readyz`, { signal: AbortSignal.timeout(2_000) });
  return res.ok;
}

const mentions = (events: unknown[], marker: string) => events.filter((e) => JSON.stringify(e).includes(marker));

describe.each(agent.HARNESS_NAMES)('a runner frozen past its lease, then thawed, with %s', (harness) => {
  it(
    'is fenced: its late writes are refused, the run and the branch are the takeover’s, and it keeps serving',
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const thawMidTakeover = round % 2 === 1;
        const prompt = `FROZEN ${harness} round ${round}`;
        const after = `AFTER ${harness} round ${round}`;
        const fake = cluster.agent(harness);
        const g = gatesFor(prompt);
        if (!thawMidTakeover) g.release1();

        const thread = await createThread(cluster, user, { repository_id: repoId, prompt, harness });
        await waitFor('the model to be asked', () => fake.requests.some((r) => r.userTexts[0] === prompt));
        // Frozen before its session held the prompt, the takeover would resume a conversation without it.
        await waitFor('the harness to record the prompt', () =>
          agent.recorded(join(cluster.sandboxRoot, thread.id), prompt),
        );
        const frozen = await waitFor('the runner holding the run', () => cluster.runnerHolding(thread.id));
        const staleHarness = cluster.harnessPids(frozen.pid, thread.id);
        signalTree(frozen.pid, 'SIGSTOP');
        // The slow answer lands while its reader is frozen: it is the first thing the harness sees on thawing.
        g.release0();
        await waitFor('attempt 0’s answer to be sent', () => g.answered0);

        // No heartbeat for longer than the ack wait: the job goes to the other runner, which claims attempt 1.
        await waitFor(
          'the takeover to claim attempt 1',
          async () => (await getRun(cluster, user, thread.run_id)).attempt === 1,
        );
        const other = cluster.runners().find((r) => r !== frozen)!;
        if (thawMidTakeover) {
          await waitFor(
            'the takeover’s turn to reach the model',
            () => fake.requests.some((r) => r.userTexts[0] === prompt && byTakeover(r, prompt)),
            60_000,
          );
        } else {
          await waitForTerminal(cluster, user, thread.run_id);
        }
        // The takeover stopped the frozen harness before starting its own (one process at a time
        // writes a conversation): it never acts on the answer waiting for it.
        expect(staleHarness.filter((pid) => commandLine(pid) !== '')).toEqual([]);
        // Attempt 0's writes are refused: its own runner's on thawing (below), and anyone else's
        // naming attempt 0 here (its claim id is the frozen runner's secret).
        const stale = new RunDriver(await cluster.connect(), thread.run_id, 0);
        await expect(stale.say('ZERO-LATE: a late reply')).rejects.toMatchObject({ code: 'already_settled' });
        await expect(stale.to('completed')).rejects.toMatchObject({ code: 'already_settled' });
        const logBeforeThaw = await readLog(cluster, user, thread.run_id);

        signalTree(frozen.pid, 'SIGCONT');
        // The thawed runner learns it was fenced (a refused move or append, or the newer attempt on
        // the run) and leaves the run to the takeover, keeping no harness for the thread.
        await waitFor('the thawed runner to leave the run', () =>
          frozen
            .output()
            .split('\n')
            .some((line) => line.includes(thread.run_id) && line.includes('fenced: a newer attempt holds the run')),
        );
        expect(cluster.harnessPids(frozen.pid, thread.id)).toEqual([]);
        g.release1();

        const run = await waitForTerminal(cluster, user, thread.run_id);
        const events = await readLog(cluster, user, thread.run_id);
        const trail = statusTrail(events);
        expect(logProblems(events), `${trail.join(' ')}\n${cluster.logs()}`).toEqual([]);
        expect(run.status, cluster.logs()).toBe('completed');
        expect(run.attempt).toBe(1);
        expect(trail.at(-1)).toBe('completed@1');
        // Attempt 0's statuses all come before attempt 1's.
        const lastZero = trail.findLastIndex((s) => s.endsWith('@0'));
        expect(lastZero, trail.join(' ')).toBeLessThan(trail.findIndex((s) => s.endsWith('@1')));
        // Nothing the thawed attempt said or ran reached the log…
        expect(mentions(events, 'ZERO-LATE'), trail.join(' ')).toEqual([]);
        expect(mentions(events, 'zero.txt')).toEqual([]);
        // …and what was there before it thawed is still there, unchanged and in order.
        expect(events.slice(0, logBeforeThaw.length)).toEqual(logBeforeThaw);
        if (!thawMidTakeover) expect(events).toHaveLength(logBeforeThaw.length);

        // The thread branch holds the takeover's work and none of the fenced attempt's.
        const files = branchFiles(thread.id);
        expect(files, cluster.logs()).toContain('one.txt');
        expect(files).not.toContain('zero.txt');

        // The thawed runner is alive, ready, and the only runner left: it takes the thread's next run.
        expect(frozen.alive()).toBe(true);
        await waitFor('the thawed runner to be ready', () => ready(frozen));
        await other.stop();
        expect(cluster.runners()).toEqual([frozen]);
        const next = await waitFor('the thread to take a follow-up', async () => {
          const res = await cluster.fetch(`/v1/threads/${thread.id}/messages`, {
            method: 'POST',
            user,
            body: JSON.stringify({ prompt: after }),
          });
          return res.status === 202 ? MessageAccepted.parse(await res.json()) : undefined;
        });
        const followUp = await waitForTerminal(cluster, user, next.run_id);
        expect(followUp.status, cluster.logs()).toBe('completed');
        expect(followUp.attempt).toBe(0);
        expect(logProblems(await readLog(cluster, user, next.run_id))).toEqual([]);
        // It went on from the thread's conversation as the takeover left it, not from its stale process.
        const asked = fake.requests.find((r) => r.lastUserText === after);
        expect(asked?.userTexts[0]).toBe(prompt);
        // Still none of the fenced attempt's work, now that a later run committed the workspace again.
        const later = branchFiles(thread.id);
        expect(later).toEqual(expect.arrayContaining(['after.txt', 'one.txt']));
        expect(later).not.toContain('zero.txt');

        // Two runners again for the next round.
        await cluster.startRunner();
      }
    },
    ROUNDS * 150_000,
  );
});
