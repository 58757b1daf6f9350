import {
  ControlList,
  ControlSubmission,
  DOMAIN_STREAM,
  RunEventPage,
  type Run,
  type RunEvent,
} from '@threadwork/contracts';
import { jetStreamOf, type JetStreamManager, type NatsConnection } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createThread, getRun, json, logProblems, readLog, waitFor } from './support/api.js';
import { Cluster, type ChaosUser } from './support/cluster.js';
import { followByLongPoll, followBySse, type FollowResult } from './support/follow.js';
import { RunDriver } from '@threadwork/testing';

// Fault: `kill -9` of nats-server, restarted on the same store and port (at once, and after
// 3 s down). The services are not restarted: they reconnect by themselves. While NATS is away the
// API answers 503 `unavailable` (never a 500, never a hang); once it is back every event page reads
// exactly as before, new events continue the sequences, and the JetStream consumers resume (a
// queued follow-up is admitted when its run ends, through threads' DOMAIN consumer).

const ROUNDS = Number(process.env.CHAOS_ROUNDS ?? 2);
/** Events of the run that is over before the fault, and of the one still live through it. */
const DONE_EVENTS = 60;
const LIVE_EVENTS = 180;
const PAGE_LIMITS = [1, 7, 100, 1000];

let cluster: Cluster;
let user: ChaosUser;
let repoId: number;
let nc: NatsConnection;
let jsm: JetStreamManager;

beforeAll(async () => {
  cluster = await Cluster.start({ runners: 0 });
  user = cluster.createUser();
  repoId = await cluster.addRepo(user);
  nc = await cluster.connect();
  ({ jsm } = await jetStreamOf(nc));
});
afterAll(async () => {
  await cluster?.stop();
});

const output = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({ type: 'command.output', item_id: 'c1', delta: `line ${from + i}` }));

async function appendInBatches(driver: RunDriver, from: number, count: number, batch = 20): Promise<number[]> {
  const sequences: number[] = [];
  for (let i = 0; i < count; i += batch) {
    sequences.push(...(await driver.append(...output(from + i, Math.min(batch, count - i)))));
  }
  return sequences;
}

/** A thread whose run is driven by the test: claimed, started and given `events` events. */
async function drivenThread(prompt: string, events: number) {
  const thread = await createThread(cluster, user, { repository_id: repoId, prompt });
  const driver = await (await RunDriver.claim(nc, thread.run_id)).start();
  const sequences = await appendInBatches(driver, 0, events);
  return { threadId: thread.id, runId: thread.run_id, driver, sequences };
}

/**
 * Every DOMAIN consumer has handled everything on the stream for it, so what threads shows no
 * longer moves (and, after the fault, proves the consumers pull again).
 */
async function domainSettled(): Promise<void> {
  await waitFor(
    'every DOMAIN consumer to catch up',
    async () => {
      const consumers = [];
      for await (const info of jsm.consumers.list(DOMAIN_STREAM.name)) consumers.push(info);
      // num_waiting: the consumer's client has a pull request open, so it is consuming.
      return (
        consumers.length > 0 &&
        consumers.every((c) => c.num_pending === 0 && c.num_ack_pending === 0 && c.num_waiting > 0)
      );
    },
    60_000,
  );
}

/** Statuses of answers (200 or 503 `unavailable` only) and of requests that hung, while reading. */
class Answers {
  readonly seen: string[] = [];

  /** GETs `path`; a 503 `unavailable` is retried (bounded), anything else but 200 is recorded as wrong. */
  async get<T>(path: string, attempts = 1): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let res: Response;
      try {
        res = await cluster.fetch(path, { user, signal: AbortSignal.timeout(20_000) });
      } catch (err) {
        this.seen.push(`no answer: ${(err as Error).message}`);
        throw err;
      }
      let body: { error?: { code?: string } };
      try {
        body = await json(res);
      } catch (err) {
        this.seen.push(`${res.status} ${(err as Error).message}`);
        throw err;
      }
      if (res.status === 200) {
        this.seen.push('200');
        return body as T;
      }
      const unavailable = res.status === 503 && body.error?.code === 'unavailable';
      this.seen.push(unavailable ? '503' : `${res.status} ${JSON.stringify(body)}`);
      if (!unavailable || attempt >= attempts) throw new Error(`GET ${path} → ${res.status} ${JSON.stringify(body)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  wrong(): string[] {
    return this.seen.filter((s) => s !== '200' && s !== '503');
  }
}

interface Snapshot {
  runs: Record<string, unknown>;
  threads: Record<string, unknown>;
  /** `<run> limit <n> from <m>` → every page read following next_sequence until an empty one. */
  pages: Record<string, RunEventPage[]>;
}

/** Everything a client can read about the runs and threads, page by page at several page sizes. */
async function snapshot(
  answers: Answers,
  runs: { runId: string; threadId: string }[],
  attempts = 1,
): Promise<Snapshot> {
  const shot: Snapshot = { runs: {}, threads: {}, pages: {} };
  for (const { runId, threadId } of runs) {
    shot.runs[runId] = await answers.get(`/v1/runs/${runId}`, attempts);
    shot.threads[threadId] = await answers.get(`/v1/threads/${threadId}`, attempts);
    const whole = await readPages(answers, runId, 1, 1000, attempts);
    const sequences = whole.flatMap((p) => p.events.map((e) => e.sequence));
    const middle = sequences[Math.floor(sequences.length / 2)]!;
    const last = sequences.at(-1)!;
    // From 1, from the middle, from just past an event (where another run's events may sit),
    // and from past the end.
    for (const from of [1, middle, middle + 1, last, last + 1, last + 1000]) {
      for (const limit of PAGE_LIMITS) {
        shot.pages[`${runId} limit ${limit} from ${from}`] = await readPages(answers, runId, from, limit, attempts);
      }
    }
  }
  return shot;
}

async function readPages(answers: Answers, runId: string, from: number, limit: number, attempts: number) {
  const pages: RunEventPage[] = [];
  for (;;) {
    const page = RunEventPage.parse(
      await answers.get(`/v1/runs/${runId}/events?from=${from}&limit=${limit}`, attempts),
    );
    pages.push(page);
    if (page.events.length === 0) return pages;
    from = page.next_sequence;
  }
}

/**
 * Asks the API over and over (a run, its events, its thread) until stopped, recording every
 * answer; `back` resolves once all three, asked after `faultIsOver()`, have answered 200.
 */
function probe(runId: string, threadId: string) {
  const answers = new Answers();
  let stopped = false;
  let faultOver = false;
  let resolveBack: () => void = () => {};
  const back = new Promise<void>((resolve) => (resolveBack = resolve));
  const loop = (async () => {
    while (!stopped) {
      // Only answers to requests sent after the fault count towards "back".
      const afterFault = faultOver;
      const results = await Promise.allSettled([
        answers.get(`/v1/runs/${runId}`),
        answers.get(`/v1/runs/${runId}/events?limit=5`),
        answers.get(`/v1/threads/${threadId}`),
      ]);
      if (afterFault && results.every((r) => r.status === 'fulfilled')) resolveBack();
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  return {
    answers,
    /** From now on, three 200s to one round of questions mean the API is back. */
    faultIsOver() {
      faultOver = true;
    },
    back,
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

const indexOf = (event: RunEvent) => {
  const chunk = event.chunk as { type?: string; delta?: string };
  return chunk.type === 'command.output' ? Number(chunk.delta!.slice('line '.length)) : undefined;
};

function followerProblems(name: string, result: FollowResult, log: RunEvent[]): string[] {
  const problems = result.problems.map((p) => `${name}: ${p}`);
  if (!result.finished) problems.push(`${name}: did not reach the end`);
  if (JSON.stringify(result.events) !== JSON.stringify(log)) {
    problems.push(`${name}: saw ${result.events.length} events, the log has ${log.length}`);
  }
  if (result.hangs) problems.push(`${name}: ${result.hangs} requests hung`);
  for (const refusal of result.refusals) {
    if (!/^503 /.test(refusal) || !refusal.includes('"code":"unavailable"')) {
      problems.push(`${name}: answered ${refusal}`);
    }
  }
  return problems;
}

async function round(label: string, downMs: number): Promise<void> {
  // A run that is over before the fault, and one that is live through it.
  const done = await drivenThread(`${label}: finished before`, DONE_EVENTS);
  await done.driver.to('completed');
  const live = await drivenThread(`${label}: live through`, LIVE_EVENTS);
  const runs = [done, live];
  await domainSettled();

  // 503 is retried here too: on a loaded machine a backing service may be slow to answer.
  const beforeAnswers = new Answers();
  const before = await snapshot(beforeAnswers, runs, 50);
  expect(beforeAnswers.wrong()).toEqual([]);
  const lastBefore = live.sequences.at(-1)!;
  const tailBefore = before.pages[`${live.runId} limit 1000 from 1`]!.at(-1)!;
  expect(tailBefore.next_sequence).toBe(lastBefore + 1);

  // Clients following the live run across the fault: once they have read everything there is,
  // the long-poll waits for more and the stream stays open, idle, through the fault.
  const caughtUp = before.pages[`${live.runId} limit 1000 from 1`]!.flatMap((p) => p.events).length;
  const progress = [0, 0];
  const followers = Promise.all([
    followByLongPoll(cluster, user, live.runId, { limit: 50, wait: 5, onProgress: (n) => (progress[0] = n) }),
    followBySse(cluster, user, live.runId, { onProgress: (n) => (progress[1] = n) }),
  ]);
  await waitFor('the followers to catch up', () => progress.every((n) => n === caughtUp), 60_000);
  const prober = probe(live.runId, live.threadId);

  await cluster.crashAndRestartNats(downMs);
  prober.faultIsOver();
  await Promise.race([
    prober.back,
    new Promise((_, reject) => setTimeout(() => reject(new Error('the API did not answer again')), 60_000)),
  ]);
  await prober.stop();
  expect(prober.answers.wrong(), cluster.logs()).toEqual([]);

  // Everything reads exactly as before.
  const afterAnswers = new Answers();
  const after = await snapshot(afterAnswers, runs, 50);
  expect(afterAnswers.wrong()).toEqual([]);
  expect(after).toEqual(before);

  // The log goes on where it stopped (the driver's own NATS connection reconnected too).
  const more = await appendInBatches(live.driver, LIVE_EVENTS, 40);
  expect(more[0]).toBeGreaterThan(lastBefore);
  const next = RunEventPage.parse(
    await afterAnswers.get(`/v1/runs/${live.runId}/events?from=${tailBefore.next_sequence}&limit=1000`),
  );
  expect(next.events.map((e) => e.sequence)).toEqual(more);
  expect(next.events.map(indexOf)).toEqual(Array.from({ length: 40 }, (_, i) => LIVE_EVENTS + i));
  expect(next.next_sequence).toBe(more.at(-1)! + 1);

  // A follow-up queued behind the live run is admitted when it ends: threads' DOMAIN consumer
  // resumed after the fault.
  const queued = await cluster.fetch(`/v1/threads/${live.threadId}/queue`, {
    method: 'POST',
    user,
    body: JSON.stringify({ prompt: `${label}: follow-up`, client_request_id: `${label}-follow-up` }),
  });
  expect(queued.status).toBe(202);
  const submission = ControlSubmission.parse(await queued.json());
  expect(submission.control.status).toBe('pending');
  await live.driver.say('done');
  await live.driver.to('completed');

  const applied = await waitFor(
    'the queued follow-up to be admitted',
    async () => {
      const control = ControlList.parse(
        await afterAnswers.get(`/v1/threads/${live.threadId}/controls`, 10),
      ).controls.find((c) => c.id === submission.control.id);
      return control?.status === 'applied' && control.created_run_id ? control : undefined;
    },
    60_000,
  );
  const followUp: Run = await getRun(cluster, user, applied.created_run_id!);
  expect(followUp.status).toBe('queued');
  // …and it runs: claimed, driven and completed through the runs service, as a runner would.
  const driver = await (await RunDriver.claim(nc, followUp.id)).start();
  await driver.say('follow-up done');
  await driver.to('completed');
  expect(logProblems(await readLog(cluster, user, followUp.id))).toEqual([]);

  // A thread created after the fault is admitted and runs too.
  const fresh = await drivenThread(`${label}: created after`, 20);
  await fresh.driver.to('completed');
  expect(logProblems(await readLog(cluster, user, fresh.runId))).toEqual([]);

  const log = await readLog(cluster, user, live.runId);
  expect(logProblems(log), cluster.logs()).toEqual([]);
  const [polled, streamed] = await followers;
  expect([...followerProblems('long-poll', polled, log), ...followerProblems('sse', streamed, log)]).toEqual([]);

  // Every service's DOMAIN consumer pulls again and has caught up on what came after the fault.
  await domainSettled();
}

describe('kill -9 of nats-server, restarted on the same store', () => {
  it('at once: pages read the same, sequences continue, services reconnect', { timeout: 600_000 }, async () => {
    for (let r = 0; r < ROUNDS; r++) await round(`at once ${r}`, 0);
  });

  it('after 3 s down: only 200 or 503 meanwhile, then the same', { timeout: 600_000 }, async () => {
    for (let r = 0; r < ROUNDS; r++) await round(`down 3 s ${r}`, 3_000);
  });
});
