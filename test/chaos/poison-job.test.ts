import { STREAM_NAMES, type ThreadWithRun } from '@threadwork/contracts';
import { jetStreamOf } from '@threadwork/platform';
import { say, type FakeReply, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createThread, getRun, logProblems, readLog, statusTrail, waitFor, waitForTerminal } from './support/api.js';
import { Cluster, type ChaosUser } from './support/cluster.js';

// Fault: a poison job — one whose processing kills whichever runner works it. The agent itself
// cannot (its jail shows it no process of the host), so the fault comes from the model's side:
// the fake model, asked for the poison's turn, `kill -9`s the runner whose harness works the
// poison's sandbox — as a crash in the runner triggered by that job would. Runners are restarted
// when they die, as their supervisor would. The job must be tried RUN_MAX_ATTEMPTS times (one
// runner death each), then its run fails `runner_lost` and the job is gone from RUN_JOBS for
// good; every other run, before, during and after, completes — including those whose runner the
// poison took down with it.

const ROUNDS = Number(process.env.CHAOS_ROUNDS ?? 2);
/** The runs service's default: attempts one run may take before it fails `runner_lost`. */
const RUN_MAX_ATTEMPTS = 3;
const ACK_WAIT_MS = 2_000;
/** The runners' durable RUN_JOBS consumer for the Codex harness (`runner-<harness>`). */
const JOB_CONSUMER = 'runner-codex';

/** The poison's thread in the round under way (its sandbox is where the harness to kill works). */
let poisonThread: string | null = null;

/** SIGKILL of the runner working the poison's sandbox; the model call it made never gets an answer. */
function killPoisonedRunner(): FakeReply {
  const runner = poisonThread ? cluster.runnerHolding(poisonThread) : undefined;
  if (runner) process.kill(runner.pid, 'SIGKILL');
  return { items: [say(runner ? 'killed' : 'no runner found')], delayMs: 60_000 };
}

const scripts = new Map<string, FakeScript>([
  ['POISON', () => killPoisonedRunner()],
  // Ordinary work: one message.
  ['PLAIN', () => [say('Plain work, done.')]],
]);

let cluster: Cluster;
let user: ChaosUser;
let repoId: number;

beforeAll(async () => {
  cluster = await Cluster.start({ runners: 2, scripts, restartRunners: true });
  user = cluster.createUser();
  repoId = await cluster.addRepo(user);
});
afterAll(async () => {
  await cluster?.stop();
});

const deaths = () => cluster.runnerHistory.filter((r) => !r.alive()).length;

async function jobConsumer() {
  const { jsm } = await jetStreamOf(await cluster.connect());
  return jsm.consumers.info(STREAM_NAMES.runJobs, JOB_CONSUMER);
}

describe('a job that crashes every runner that takes it', () => {
  it(
    'is given up after RUN_MAX_ATTEMPTS: its run fails runner_lost, other runs complete',
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const deathsBefore = deaths();
        const plain: ThreadWithRun[] = [];
        const ordinary = async (when: string) => {
          plain.push(
            await createThread(cluster, user, {
              repository_id: repoId,
              prompt: `PLAIN ${when} ${plain.length} r${round}`,
            }),
          );
        };

        await ordinary('before');
        await ordinary('before');
        const prompt = `POISON round ${round}`;
        const poison = await createThread(cluster, user, { repository_id: repoId, prompt });
        poisonThread = poison.id;
        // Ordinary threads keep coming while the poison takes runners down, one every death or so.
        let failedPoison = await getRun(cluster, user, poison.run_id);
        for (let i = 0; !failedPoison.terminal; i++) {
          if (i % 10 === 0 && plain.length < 10) await ordinary('during');
          await new Promise((resolve) => setTimeout(resolve, 250));
          failedPoison = await getRun(cluster, user, poison.run_id);
        }
        await ordinary('after');
        await ordinary('after');

        // The poison run: failed once every attempt was spent, one runner death per attempt.
        const events = await readLog(cluster, user, poison.run_id);
        const trail = statusTrail(events);
        expect(logProblems(events), `${trail.join(' ')}\n${cluster.logs()}`).toEqual([]);
        expect(failedPoison.status, `${trail.join(' ')} ${JSON.stringify(events.map((e) => e.chunk))}`).toBe('failed');
        expect(failedPoison.error?.code).toBe('runner_lost');
        expect(failedPoison.attempt).toBe(RUN_MAX_ATTEMPTS - 1);
        expect(trail.at(-1)).toBe(`failed@${RUN_MAX_ATTEMPTS - 1}`);
        const attemptsAtModel = new Set(
          cluster.fake!.requests.filter((r) => r.userTexts[0] === prompt).map((r) => r.metadata.threadwork_attempt),
        );
        expect([...attemptsAtModel].sort()).toEqual(['0', '1', '2'].slice(0, RUN_MAX_ATTEMPTS));
        expect(deaths() - deathsBefore, trail.join(' ')).toBe(RUN_MAX_ATTEMPTS);

        // Every ordinary run completes, whether or not the poison took its runner down under it (the
        // job comes back and another attempt finishes it; one lost while still `starting` just starts
        // over). The one way an ordinary run may fail is the poison's own: losing its runner on every
        // attempt it had, i.e. sharing the poison's runner at all RUN_MAX_ATTEMPTS of the deaths.
        for (const thread of plain) {
          const run = await waitForTerminal(cluster, user, thread.run_id, 120_000);
          const log = await readLog(cluster, user, thread.run_id);
          const why = `${thread.run_id}: ${statusTrail(log).join(' ')} ${JSON.stringify(run.error)}`;
          expect(logProblems(log), why).toEqual([]);
          if (run.status === 'failed' && run.error?.code === 'runner_lost' && run.attempt === RUN_MAX_ATTEMPTS - 1) {
            continue;
          }
          expect(run.status, why).toBe('completed');
        }

        // The job is gone: acked once the run failed, never delivered again (no runner dies any more).
        const consumer = await waitFor('RUN_JOBS to have nothing pending', async () => {
          const info = await jobConsumer();
          return info.num_pending === 0 && info.num_ack_pending === 0 ? info : undefined;
        });
        // JetStream itself would have given up after max_deliver: that must never come before the
        // attempts run out (RUN_MAX_ATTEMPTS deliveries, then one more whose claim fails the run).
        const maxDeliver = consumer.config.max_deliver ?? -1;
        expect(maxDeliver === -1 || maxDeliver > RUN_MAX_ATTEMPTS, `max_deliver ${maxDeliver}`).toBe(true);
        const settled = deaths();
        await new Promise((resolve) => setTimeout(resolve, 3 * ACK_WAIT_MS));
        expect(deaths()).toBe(settled);
        expect(deaths() - deathsBefore).toBe(RUN_MAX_ATTEMPTS);
        const { jsm } = await jetStreamOf(await cluster.connect());
        expect((await jsm.streams.info(STREAM_NAMES.runJobs)).state.messages).toBe(0);

        // Two runners up again before the next round.
        await waitFor('two runners to be up', () => cluster.runners().length >= 2, 60_000);
      }
    },
    ROUNDS * 240_000,
  );
});
