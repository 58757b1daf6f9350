import {
  AnswerResult,
  ControlList,
  ControlSubmission,
  ErrorBody,
  Interaction,
  MessageAccepted,
  MessagePage,
  ResumableRun,
  Run,
  RunEventPage,
  TaskList,
  Thread,
  ThreadWithRun,
  WorkList,
  rpc,
  type RunEvent,
  type RunStatus,
} from '@threadwork/contracts';
import { isAppError, request, type NatsConnection } from '@threadwork/platform';
import { newClaimId, uniqueId, RunDriver, question } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logProblems, statusTrail, waitFor } from './support/api.js';
import { Cluster, type ChaosUser } from './support/cluster.js';
import { random } from './support/random.js';

// The "exactly one wins" decisions of the API issue, raced at scale against the real services as
// separate processes on FerretDB (which does not make conditional updates atomic), CHAOS_ROUNDS
// rounds each. No runner is started: the test stands in for it through the runs service's
// internal API (claim, transition, interactions: what RunDriver does), so it decides when each
// run ends. Everything asserted is read back through the public HTTP API.

const ROUNDS = Number(process.env.CHAOS_ROUNDS ?? 3);
const THREADS = 20;
/** A round of the larger scenarios takes well under a minute here; far more is allowed. */
const TIMEOUT_MS = Math.max(300_000, ROUNDS * 120_000);

let cluster: Cluster;
let user: ChaosUser;
let repoId: number;
let nc: NatsConnection;

beforeAll(async () => {
  // Races, not latency, are under test: the gateway waits for a busy backing service rather than
  // answering 503 after the default 5 s.
  cluster = await Cluster.start({ runners: 0, env: { REQUEST_TIMEOUT_MS: '30000' } });
  user = cluster.createUser();
  repoId = await cluster.addRepo(user);
  nc = await cluster.connect();
});
afterAll(async () => {
  await cluster?.stop();
});

interface Reply {
  status: number;
  body: unknown;
}

/** Tries of a retried call; with the backoff below, over a minute in all. */
const API_TRIES = 12;

/**
 * One API call. With `retry`, a 503 (a backing service did not answer in time, which a busy
 * machine can cause) or a dropped connection is retried as a client would, backing off: only
 * requests that are safe to repeat (reads, or writes with a client_request_id) ask for it.
 */
async function api(
  who: ChaosUser,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  { retry = false }: { retry?: boolean } = {},
): Promise<Reply> {
  for (let tries = 1; ; tries++) {
    try {
      const res = await cluster.fetch(path, {
        method,
        user: who,
        ...(body === undefined
          ? method === 'POST'
            ? { headers: { 'content-type': 'text/plain' } }
            : {}
          : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      const reply = { status: res.status, body: text ? (JSON.parse(text) as unknown) : null };
      if (!retry || reply.status !== 503 || tries >= API_TRIES) return reply;
    } catch (err) {
      if (!retry || tries >= API_TRIES) throw err;
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(250 * 2 ** tries, 8_000) * (0.5 + random())));
  }
}

const show = (reply: Reply) => `${reply.status} ${JSON.stringify(reply.body)}`;
const errorCode = (reply: Reply) => ErrorBody.safeParse(reply.body).data?.error.code;

async function read<T>(path: string, parse: (body: unknown) => T, who: ChaosUser = user): Promise<T> {
  const reply = await api(who, 'GET', path, undefined, { retry: true });
  if (reply.status !== 200) throw new Error(`GET ${path} → ${show(reply)}`);
  return parse(reply.body);
}

/** Every page of a list (GET /v1/tasks or /v1/work), the largest pages, following `next_cursor`. */
async function allPages<P extends { next_cursor?: string | null | undefined }>(
  path: string,
  parse: (body: unknown) => P,
  who: ChaosUser = user,
): Promise<P[]> {
  const pages: P[] = [];
  let cursor: string | null | undefined;
  do {
    pages.push(await read(`${path}?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, parse, who));
    cursor = pages.at(-1)!.next_cursor;
  } while (cursor);
  return pages;
}

const allWorkThreads = async (who: ChaosUser = user) =>
  (await allPages('/v1/work', (b) => WorkList.parse(b), who)).flatMap((page) =>
    page.projects.flatMap((p) => p.threads),
  );

const runOf = (runId: string) => read(`/v1/runs/${runId}`, (b) => Run.parse(b));

/** The thread's live run as the API reports it (GET /v1/tasks/{id}/runs/resumable), or null. */
async function liveRunOf(threadId: string, who: ChaosUser = user): Promise<string | null> {
  const reply = await api(who, 'GET', `/v1/tasks/${threadId}/runs/resumable`, undefined, { retry: true });
  if (reply.status === 204) return null;
  if (reply.status !== 200) throw new Error(`resumable run of ${threadId} → ${show(reply)}`);
  return ResumableRun.parse(reply.body).run_id;
}

const controlsOf = (threadId: string, status?: 'pending' | 'applied') =>
  read(`/v1/threads/${threadId}/controls${status ? `?status=${status}` : ''}`, (b) => ControlList.parse(b).controls);

const messagesOf = (threadId: string, who: ChaosUser = user) =>
  read(`/v1/threads/${threadId}/messages?limit=200`, (b) => MessagePage.parse(b).messages, who);

/** A run's whole log; one page for an ended run (a page that reaches the end of its log says `terminal`). */
async function logOf(runId: string, who: ChaosUser = user): Promise<RunEvent[]> {
  const events: RunEvent[] = [];
  for (let from = 1; ;) {
    const page = await read(`/v1/runs/${runId}/events?from=${from}&limit=1000`, (b) => RunEventPage.parse(b), who);
    events.push(...page.events);
    if (page.terminal || page.events.length === 0) return events;
    from = page.next_sequence;
  }
}

const threadOf = (threadId: string) => read(`/v1/threads/${threadId}`, (b) => Thread.parse(b));

/** Creates a thread; its client_request_id makes a 503 retry the same create. */
async function create(prompt: string): Promise<ThreadWithRun> {
  const body = { repository_id: repoId, prompt, client_request_id: uniqueId('create-') };
  const reply = await api(user, 'POST', '/v1/threads', body, { retry: true });
  if (reply.status !== 202) throw new Error(`POST /v1/threads → ${show(reply)}`);
  return ThreadWithRun.parse(reply.body);
}

/**
 * `fn` over `items`, at most `limit` at a time, results in order. Setting a race up and checking
 * it afterwards are not what is raced: bounding them keeps FerretDB's queue (one SQLite writer)
 * short on this small machine, so only the race itself runs at full width.
 */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>) {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) results[i] = await fn(items[i]!, i);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

const chunkOf = (event: RunEvent) => event.chunk as { type: string; status?: string; interaction_id?: string };

/** The status of the log's terminal event (logProblems has checked there is exactly one, last). */
const loggedOutcome = (events: RunEvent[]) => chunkOf(events.at(-1)!).status;

/**
 * How long the test, as a runner, waits for the runs service. RunDriver's requests give up after
 * 5 s, which a loaded two-core machine can exceed; retrying an unanswered claim would race the
 * claim still in flight, which is not the race under test.
 */
const RUNNER_TIMEOUT_MS = 60_000;

/**
 * The test as the runner of one run, through the runs service's internal API (claim, transition,
 * and RunDriver for interactions), with RUNNER_TIMEOUT_MS to answer.
 */
class Runner {
  private constructor(
    readonly runId: string,
    readonly attempt: number,
    readonly claimId: string,
  ) {}

  static async claim(runId: string): Promise<Runner> {
    const claimId = newClaimId();
    const claimed = await request(
      nc,
      rpc.runs.claim,
      { run_id: runId, runner_id: 'chaos-races', claim_id: claimId },
      { timeoutMs: RUNNER_TIMEOUT_MS },
    );
    return new Runner(runId, claimed.attempt, claimId);
  }

  /** Claimed (which moves it to `starting`), then running. */
  static async started(runId: string): Promise<Runner> {
    return (await Runner.claim(runId)).start();
  }

  to(status: RunStatus, extra: { error?: { code: string; message: string } } = {}): Promise<Run> {
    return request(
      nc,
      rpc.runs.transition,
      { run_id: this.runId, attempt: this.attempt, claim_id: this.claimId, to: status, ...extra },
      { timeoutMs: RUNNER_TIMEOUT_MS },
    );
  }

  /** starting → running: the harness is up. */
  async start(): Promise<this> {
    await this.to('running');
    return this;
  }

  ask(...args: Parameters<RunDriver['ask']>) {
    return new RunDriver(nc, this.runId, this.attempt, this.claimId).ask(...args);
  }

  settlement(interactionId: string) {
    return new RunDriver(nc, this.runId, this.attempt, this.claimId).settlement(interactionId);
  }
}

/** `waitFor` at a gentle pace: twenty threads poll at once, and the polling must not be the load. */
const poll = <T>(what: string, check: () => Promise<T | undefined | null | false>, timeoutMs = 60_000): Promise<T> =>
  waitFor(what, check, timeoutMs, 500);

const jitter = (maxMs: number) => new Promise((resolve) => setTimeout(resolve, random() * maxMs));

describe('races at scale', () => {
  it(
    '50 concurrent answers to one interaction: one 200, 49 × 409 already_settled, one settlement',
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const at = `round ${round}`;
        const thread = await create(`answers ${at}`);
        const driver = await Runner.started(thread.run_id);
        const labels = Array.from({ length: 50 }, (_, i) => `choice-${i}`);
        const interaction = await driver.ask([question('pick', labels)]);
        // Every tenth caller cancels instead of answering: either kind may win, exactly one does.
        const requests = labels.map((label, i) =>
          i % 10 === 9
            ? { action: 'cancel' as const }
            : { action: 'answer' as const, answers: { pick: { kind: 'options' as const, optionIds: [label] } } },
        );
        const replies = await Promise.all(
          requests.map((body) => api(user, 'POST', `/v1/interactions/${interaction.id}/answer`, body)),
        );

        const winners = replies.flatMap((reply, i) => (reply.status === 200 ? [i] : []));
        const losers = replies.filter((reply) => reply.status === 409 && errorCode(reply) === 'already_settled');
        const context = `${at}: ${replies.map(show).join('\n')}`;
        expect(winners, `${at}: exactly one answer wins\n${context}`).toHaveLength(1);
        expect(losers, `${at}: every other answer is 409 already_settled\n${context}`).toHaveLength(49);

        const winner = requests[winners[0]!]!;
        const result = AnswerResult.parse(replies[winners[0]!]!.body);
        const expected =
          winner.action === 'answer'
            ? { status: 'answered', cancelledBy: null, answers: winner.answers }
            : { status: 'cancelled', cancelledBy: 'user', answers: {} };
        expect(result, at).toMatchObject({ interactionId: interaction.id, ...expected });

        // The interaction as read back, and as the runner reads it, is the winner's.
        const current = await read(`/v1/interactions/${interaction.id}`, (b) => Interaction.parse(b));
        expect(current, `${at}: GET shows the winner`).toMatchObject({ ...expected, resolvedAt: result.resolvedAt });
        const settlement = await driver.settlement(interaction.id);
        expect(settlement.answers, `${at}: the runner reads the winner's answers`).toEqual(expected.answers);

        // One settlement in the log, and the run resumed once.
        const run = await runOf(thread.run_id);
        expect(run.status, at).toBe('running');
        await driver.to('completed');
        const events = await logOf(thread.run_id);
        const settled = events.filter((e) => chunkOf(e).type === 'interaction.settled');
        expect(settled, `${at}: one interaction.settled event`).toHaveLength(1);
        expect(settled[0]!.chunk, at).toMatchObject({ interaction_id: interaction.id, status: expected.status });
        expect(logProblems(events), at).toEqual([]);
        expect(statusTrail(events), `${at}: the answer resumed the run once`).toEqual([
          'queued@0',
          'starting@0',
          'running@0',
          'waiting_for_input@0',
          'running@0',
          'completed@0',
        ]);
      }
    },
    TIMEOUT_MS,
  );

  it(
    '20 concurrent identical creates: one thread, one run, one message',
    async () => {
      // A user of its own, so that its task list holds nothing but what these rounds create.
      const creator = cluster.createUser();
      const repo = await cluster.addRepo(creator);
      const tasks = async () =>
        (await allPages('/v1/tasks', (b) => TaskList.parse(b), creator)).flatMap((page) => page.tasks);
      const workThreads = () => allWorkThreads(creator);

      for (let round = 0; round < ROUNDS; round++) {
        const at = `round ${round}`;
        const body = { repository_id: repo, prompt: `only once, ${at}`, client_request_id: uniqueId('create-') };
        const before = await tasks();
        const replies = await Promise.all(
          Array.from({ length: 20 }, () => api(creator, 'POST', '/v1/threads', body, { retry: true })),
        );
        const context = `${at}:\n${replies.map(show).join('\n')}`;
        for (const reply of replies) expect(reply.status, context).toBe(202);
        const created = replies.map((reply) => ThreadWithRun.parse(reply.body));
        const [first] = created;
        for (const c of created) {
          expect(
            { id: c.id, run_id: c.run_id, message_id: c.message_id },
            `${at}: every create answers the same`,
          ).toEqual({ id: first!.id, run_id: first!.run_id, message_id: first!.message_id });
        }

        const after = await tasks();
        expect(after.map((t) => t.id).sort(), `${at}: GET /v1/tasks gained exactly this thread`).toEqual(
          [...before.map((t) => t.id), first!.id].sort(),
        );
        const listed = (await workThreads()).filter((t) => t.prompt === body.prompt);
        expect(
          listed.map((t) => ({ id: t.id, latest_run: t.latest_run?.id })),
          `${at}: GET /v1/work shows one thread`,
        ).toEqual([{ id: first!.id, latest_run: first!.run_id }]);
        const messages = await messagesOf(first!.id, creator);
        expect(
          messages.map((m) => ({ id: m.id, text: m.parts[0]?.text })),
          `${at}: one message`,
        ).toEqual([{ id: first!.message_id, text: body.prompt }]);
        expect(await liveRunOf(first!.id, creator), `${at}: the one run is the live one`).toBe(first!.run_id);

        // No second run waits behind the first: once it ends, the thread is idle.
        const driver = await Runner.started(first!.run_id);
        await driver.to('completed');
        expect(await liveRunOf(first!.id, creator), `${at}: nothing else was admitted`).toBeNull();
        const events = await logOf(first!.run_id, creator);
        expect(logProblems(events), at).toEqual([]);
        expect(statusTrail(events), `${at}: admitted once`).toEqual([
          'queued@0',
          'starting@0',
          'running@0',
          'completed@0',
        ]);

        // A replay still answers the same; the same key with another body is refused.
        const replay = await api(creator, 'POST', '/v1/threads', body, { retry: true });
        expect(ThreadWithRun.parse(replay.body), at).toMatchObject({ id: first!.id, run_id: first!.run_id });
        const other = await api(creator, 'POST', '/v1/threads', { ...body, prompt: 'something else' });
        expect([other.status, errorCode(other)], at).toEqual([409, 'idempotency_conflict']);
      }
    },
    TIMEOUT_MS,
  );

  it(
    'messages, queues and steers racing run ends on 20 threads: one live run, every message once, queue in order',
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const ends: EndKind[] = ['completed', 'failed', 'cancelled'];
        // Twenty threads, each with its first run running.
        const threads = Array.from({ length: THREADS }, (_, i) => i);
        const prepared = await mapLimit(threads, 4, async (i) => {
          const thread = await create(`race round ${round} thread ${i}`);
          return { thread, driver: await Runner.started(thread.run_id) };
        });
        // All at once: each thread's run ends while its clients send, queue and steer.
        const races = await Promise.all(
          prepared.map(({ thread, driver }, i) =>
            raceOneThread(`round ${round} thread ${i}`, thread, driver, ends[i % ends.length]!),
          ),
        );
        // Every run the race left behind is ended in turn, admitting the next queued one each time.
        await Promise.all(races.map(drainThread));
        const problems = (await mapLimit(races, 4, threadProblems)).flat();
        problems.push(...(await latestRunProblems(races)));
        expect(problems, `round ${round}`).toEqual([]);
      }
    },
    TIMEOUT_MS,
  );

  it(
    'cancel racing completion: one terminal state, one terminal event, and every reader agrees',
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const cases = Array.from({ length: 12 }, (_, i) => CANCEL_CASES[i % CANCEL_CASES.length]!);
        const prepared = await mapLimit(cases, 4, (kind, i) =>
          prepareCancel(`round ${round} case ${i} (${kind})`, kind),
        );
        await Promise.all(prepared.map(raceCancel));
        const problems = (await mapLimit(prepared, 4, cancelProblems)).flat();
        expect(problems, `round ${round}`).toEqual([]);
      }
    },
    TIMEOUT_MS,
  );
});

// ---------------------------------------------------------------------------------------------
// Messages, queues and steers racing a run's end

type EndKind = 'completed' | 'failed' | 'cancelled';

interface SentMessage {
  message_id: string;
  prompt: string;
  reply: Reply;
}

interface ThreadRace {
  at: string;
  thread: ThreadWithRun;
  end: EndKind;
  sends: SentMessage[];
  /** Queued by one client one after another: their runs must come in this order. */
  queues: SentMessage[];
  steers: { prompt: string; reply: Reply }[];
  /** The runs the test ended, in order (the raced one first). */
  driven: string[];
  /** The thread's last run, once threadProblems has found it. */
  last?: Run | undefined;
  problems: string[];
}

/** Ends the run as its runner would: completion, failure, or a user's cancel the runner then confirms. */
async function endRun(driver: Runner, end: EndKind): Promise<void> {
  if (end === 'completed') {
    await driver.to('completed');
  } else if (end === 'failed') {
    await driver.to('failed', { error: { code: 'chaos', message: 'failed on purpose' } });
  } else {
    const reply = await api(user, 'POST', `/v1/runs/${driver.runId}/cancel`, undefined, { retry: true });
    if (reply.status !== 202) throw new Error(`cancel of the running ${driver.runId} → ${show(reply)}`);
    // The harness stopped: the runner reports the cancellation done.
    await driver.to('cancelled');
  }
}

/**
 * The thread's running run ends while three clients act on the thread at once: one sends two
 * messages, one queues three follow-ups one after the other, one steers. Every request carries
 * a client_request_id, so a 503 retry is the same request.
 */
async function raceOneThread(at: string, thread: ThreadWithRun, driver: Runner, end: EndKind): Promise<ThreadRace> {
  const race: ThreadRace = {
    at,
    thread,
    end,
    sends: [],
    queues: [],
    steers: [],
    driven: [thread.run_id],
    problems: [],
  };
  const post = (op: string, body: unknown) =>
    api(user, 'POST', `/v1/threads/${thread.id}/${op}`, body, { retry: true });
  const sender = async (n: number) => {
    const message_id = uniqueId('msg-send-');
    const prompt = `${at}: send ${n}`;
    const reply = await post('messages', { prompt, message_id, client_request_id: message_id });
    race.sends.push({ message_id, prompt, reply });
  };
  const queuer = async () => {
    for (let n = 0; n < 3; n++) {
      const message_id = uniqueId('msg-queue-');
      const prompt = `${at}: queue ${n}`;
      const reply = await post('queue', { prompt, message_id, client_request_id: message_id });
      race.queues.push({ message_id, prompt, reply });
    }
  };
  const steerer = async () => {
    const prompt = `${at}: steer`;
    const reply = await post('steer', { prompt, client_request_id: uniqueId('steer-') });
    race.steers.push({ prompt, reply });
  };
  await Promise.all([
    jitter(60).then(() => endRun(driver, end)),
    jitter(30).then(() => Promise.all([sender(0), sender(1)])),
    queuer(),
    jitter(30).then(steerer),
  ]);
  checkReplies(race);
  return race;
}

/** What each reply may be by DESIGN.md section 4 (Behaviour). */
function checkReplies(race: ThreadRace): void {
  const problem = (what: string, reply: Reply) => race.problems.push(`${race.at}: ${what}: ${show(reply)}`);
  for (const send of race.sends) {
    if (send.reply.status === 202) {
      const accepted = MessageAccepted.safeParse(send.reply.body);
      if (!accepted.success || accepted.data.message_id !== send.message_id || accepted.data.run_status !== 'queued') {
        problem(`send ${send.message_id} was accepted with another message or state`, send.reply);
      }
    } else if (send.reply.status !== 409 || errorCode(send.reply) !== 'thread_busy') {
      problem('a send is 202 accepted or 409 thread_busy', send.reply);
    }
  }
  for (const queue of race.queues) {
    const submission = ControlSubmission.safeParse(queue.reply.body);
    if (queue.reply.status !== 202 || !submission.success) {
      problem('a queue is always 202 with a control', queue.reply);
      continue;
    }
    const { control, run } = submission.data;
    // Applied at once (the thread was idle) with its run, or pending behind the active run.
    const consistent =
      control.kind === 'queue' &&
      control.prompt === queue.prompt &&
      (control.status === 'applied'
        ? run !== null && run.run_id === control.created_run_id && run.message_id === queue.message_id
        : run === null && control.created_run_id === null);
    if (!consistent) problem('queue reply: `run` is set exactly when the control is applied', queue.reply);
  }
  for (const steer of race.steers) {
    if (steer.reply.status === 409) {
      if (errorCode(steer.reply) !== 'no_active_run') problem('a steer is 202 or 409 no_active_run', steer.reply);
      continue;
    }
    const submission = ControlSubmission.safeParse(steer.reply.body);
    if (steer.reply.status !== 202 || !submission.success) {
      problem('a steer is 202 with a control', steer.reply);
      continue;
    }
    const { control, run } = submission.data;
    const consistent =
      control.kind === 'steer' &&
      control.target_run_id !== null &&
      (control.status === 'applied' ? run !== null && run.run_id === control.created_run_id : run === null);
    if (!consistent) problem('steer reply: pending with no run, or applied with the run it admitted', steer.reply);
  }
}

/**
 * Ends every run the race left behind, one at a time, until the thread is idle with nothing
 * pending. Pending controls with no live run are the queue on its way to admitting
 * the next one; if that never happens, the wait times out and names the thread.
 */
async function drainThread(race: ThreadRace): Promise<void> {
  const threadId = race.thread.id;
  for (;;) {
    const next = await poll(
      `${race.at}: the next queued run, or an empty queue`,
      async () => {
        const live = await liveRunOf(threadId);
        if (live) return { live };
        if ((await controlsOf(threadId, 'pending')).length > 0) return undefined;
        // Nothing pending: idle for good, unless a run was admitted between the two reads.
        const again = await liveRunOf(threadId);
        return again ? { live: again } : { done: true as const };
      },
      60_000,
    );
    if ('done' in next) return;
    if (race.driven.includes(next.live)) {
      race.problems.push(`${race.at}: run ${next.live} is live again after it ended`);
      return;
    }
    try {
      await poll(`${race.at}: the thread to show active with ${next.live} live`, async () => {
        return (await threadOf(threadId)).status === 'active';
      });
    } catch (err) {
      race.problems.push((err as Error).message);
    }
    race.driven.push(next.live);
    // No runner has it: a cancel ends it at once (DESIGN.md section 4), which frees the thread for
    // the next pending control just as any other end would.
    const cancel = await api(user, 'POST', `/v1/runs/${next.live}/cancel`, undefined, { retry: true });
    const cancelled = Run.safeParse(cancel.body).data;
    // 202, or 200 when a retry follows a cancel that went through but was not answered in time.
    if ((cancel.status !== 202 && cancel.status !== 200) || cancelled?.status !== 'cancelled') {
      race.problems.push(`${race.at}: cancelling the queued ${next.live} → ${show(cancel)}`);
      return;
    }
  }
}

/** Every invariant of one raced thread, as the public API shows it once everything has ended. */
async function threadProblems(race: ThreadRace): Promise<string[]> {
  const { at, thread } = race;
  const problems = [...race.problems];
  const problem = (text: string) => problems.push(`${at}: ${text}`);

  // The raced run ended the way its runner (or its canceller) ended it.
  const first = await runOf(thread.run_id);
  if (first.status !== race.end) problem(`the raced run is ${first.status}, not ${race.end}`);

  // Every run the thread has, from every source the API names one: the creation, accepted sends,
  // the controls that admitted a run, and the live runs the drain found.
  const controls = await controlsOf(thread.id);
  const acceptedSends = race.sends.filter((s) => s.reply.status === 202);
  const sendRuns = acceptedSends.map((s) => MessageAccepted.parse(s.reply.body).run_id);
  const controlRuns = controls.flatMap((c) => (c.created_run_id ? [c.created_run_id] : []));
  const named = [thread.run_id, ...sendRuns, ...controlRuns];
  if (new Set(named).size !== named.length) problem(`a run is named twice: ${named.join(' ')}`);
  const unknownDriven = race.driven.filter((id) => !named.includes(id));
  const neverLive = named.filter((id) => !race.driven.includes(id));
  if (unknownDriven.length) problem(`live runs nothing admitted: ${unknownDriven.join(' ')}`);
  if (neverLive.length) problem(`admitted runs never seen live: ${neverLive.join(' ')}`);

  const runs = await Promise.all([...new Set([...named, ...race.driven])].map(runOf));
  const byId = new Map(runs.map((r) => [r.id, r]));

  // Never two live runs at any moment: in admission order, each run was created no earlier than
  // the previous one ended (both times are the runs service's own clock).
  const ordered = [...runs].sort((a, b) => a.created_at.localeCompare(b.created_at));
  for (const run of ordered) if (!run.terminal) problem(`run ${run.id} is still ${run.status}`);
  for (let i = 1; i < ordered.length; i++) {
    const [prev, next] = [ordered[i - 1]!, ordered[i]!];
    if (!prev.completed_at || prev.completed_at > next.created_at) {
      problem(
        `run ${next.id} was admitted at ${next.created_at} while ${prev.id} was live (ended ${prev.completed_at})`,
      );
    }
  }
  for (const run of runs) {
    const events = await logOf(run.id);
    const log = logProblems(events);
    if (log.length) problem(`log of ${run.id}: ${log.join('; ')}`);
    else if (loggedOutcome(events) !== run.status) {
      problem(`${run.id} is ${run.status} but its log ends ${loggedOutcome(events)}`);
    }
  }

  // Every accepted message was admitted exactly once; a refused one left nothing behind.
  const messages = await messagesOf(thread.id);
  const shown = new Map<string, string[]>();
  for (const m of messages) shown.set(m.id, [...(shown.get(m.id) ?? []), m.parts.map((p) => p.text).join('')]);
  const runMessages = runs.map((r) => r.message_id);
  if (new Set(runMessages).size !== runMessages.length) problem(`two runs for one message: ${runMessages.join(' ')}`);
  for (const [id, texts] of shown) if (texts.length !== 1) problem(`message ${id} is shown ${texts.length} times`);
  const extra = [...shown.keys()].filter((id) => !runMessages.includes(id));
  const missing = runMessages.filter((id) => !shown.has(id));
  if (extra.length) problem(`messages that started no run: ${extra.join(' ')}`);
  if (missing.length) problem(`runs whose message is not shown: ${missing.join(' ')}`);
  for (const send of race.sends) {
    const texts = shown.get(send.message_id);
    if (send.reply.status === 202) {
      const runId = MessageAccepted.parse(send.reply.body).run_id;
      if (byId.get(runId)?.message_id !== send.message_id) problem(`run ${runId} is not the run of ${send.message_id}`);
      if (texts?.[0] !== send.prompt) problem(`accepted send ${send.message_id} shows ${JSON.stringify(texts)}`);
    } else if (send.reply.status === 409 && texts) {
      problem(`refused send ${send.message_id} left its message behind`);
    }
  }

  // Every accepted queue and steer was applied exactly once, by a run of its own.
  const acceptedSteers = race.steers.filter((s) => s.reply.status === 202);
  const expectedControls = [
    ...race.queues.flatMap((q) => ControlSubmission.safeParse(q.reply.body).data?.control.id ?? []),
    ...acceptedSteers.flatMap((s) => ControlSubmission.safeParse(s.reply.body).data?.control.id ?? []),
  ];
  const controlIds = controls.map((c) => c.id);
  if (controlIds.length !== expectedControls.length || !expectedControls.every((id) => controlIds.includes(id))) {
    problem(`controls ${controlIds.join(' ')} are not the accepted ${expectedControls.join(' ')}`);
  }
  for (const control of controls) {
    const run = control.created_run_id ? byId.get(control.created_run_id) : undefined;
    if (control.status !== 'applied' || !run) {
      problem(`control ${control.kind} ${control.id} is ${control.status} with run ${control.created_run_id}`);
    } else if (shown.get(run.message_id)?.[0] !== control.prompt) {
      problem(`run ${run.id} of control ${control.id} shows ${JSON.stringify(shown.get(run.message_id))}`);
    }
  }
  // The run each queue admitted (undefined where checkReplies found the reply wrong already).
  const queueRuns = race.queues.map((queue) => {
    const id = ControlSubmission.safeParse(queue.reply.body).data?.control.id;
    const run = byId.get(controls.find((c) => c.id === id)?.created_run_id ?? '');
    if (run && run.message_id !== queue.message_id) problem(`queue ${queue.message_id} admitted ${run.message_id}`);
    return run;
  });

  // The follow-ups one client queued in turn were admitted in that order.
  for (let i = 1; i < queueRuns.length; i++) {
    const [prev, next] = [queueRuns[i - 1], queueRuns[i]];
    if (prev && next && prev.created_at >= next.created_at) {
      problem(
        `queue ${i} was admitted (${next.id} at ${next.created_at}) before queue ${i - 1} (${prev.id} at ${prev.created_at})`,
      );
    }
  }

  // The thread is idle (its latest run is checked for all threads at once, in latestRunProblems).
  race.last = ordered.at(-1);
  try {
    await poll(`${at}: the thread to be idle`, async () => (await threadOf(thread.id)).status === 'idle');
  } catch (err) {
    problem(`${(err as Error).message} (thread ${thread.id})`);
  }
  return problems;
}

/** The work list shows each thread's last admitted run as its latest, as it ended. */
async function latestRunProblems(races: ThreadRace[]): Promise<string[]> {
  const mismatches = async () => {
    const latest = new Map((await allWorkThreads()).map((t) => [t.id, t.latest_run]));
    return races.flatMap(({ at, thread, last }) => {
      const shown = latest.get(thread.id);
      return shown?.id === last?.id && shown?.status === last?.status
        ? []
        : [`${at}: the work list shows ${JSON.stringify(shown)} as the latest run, not ${last?.id} (${last?.status})`];
    });
  };
  try {
    await poll('the work list to show every thread’s last run', async () => (await mismatches()).length === 0);
    return [];
  } catch {
    return mismatches();
  }
}

// ---------------------------------------------------------------------------------------------
// Cancel racing completion

const CANCEL_CASES = [
  /** A running run completes while the user cancels it. */
  'complete-vs-cancel',
  /** A running run completes while the user cancels it and the runner, signalled, confirms the cancel. */
  'complete-vs-confirmed-cancel',
  /** A running run fails while the user cancels it and the runner confirms. */
  'fail-vs-confirmed-cancel',
  /** A queued run is cancelled while a runner claims, starts and completes it. */
  'claim-and-complete-vs-cancel-queued',
] as const;
type CancelCase = (typeof CANCEL_CASES)[number];

interface CancelRace {
  at: string;
  kind: CancelCase;
  thread: ThreadWithRun;
  /** The runner of the run, for the cases where it runs before the race. */
  driver: Runner | undefined;
  /** What each side saw of the run once its call returned. */
  seen: { who: string; run: Run }[];
  problems: string[];
}

/**
 * A thread whose run is running (or still queued, for the queued case), with a follow-up queued
 * behind it: however the race goes, the follow-up must be admitted exactly once when the run ends.
 */
async function prepareCancel(at: string, kind: CancelCase): Promise<CancelRace> {
  const race: CancelRace = {
    at,
    kind,
    thread: await create(`cancel race ${at}`),
    driver: undefined,
    seen: [],
    problems: [],
  };
  if (kind !== 'claim-and-complete-vs-cancel-queued') race.driver = await Runner.started(race.thread.run_id);
  const followUp = await api(
    user,
    'POST',
    `/v1/threads/${race.thread.id}/queue`,
    { prompt: `${at}: after`, client_request_id: uniqueId('after-') },
    { retry: true },
  );
  const pending = ControlSubmission.parse(followUp.body).control;
  if (pending.status !== 'pending') {
    race.problems.push(`${at}: a follow-up queued behind a live run is ${pending.status}`);
  }
  return race;
}

/** The cancel and the run's own end, at once. */
async function raceCancel(race: CancelRace): Promise<void> {
  const { at, kind, driver, seen } = race;
  const runId = race.thread.run_id;
  const queued = kind === 'claim-and-complete-vs-cancel-queued';
  const problem = (text: string) => race.problems.push(`${at}: ${text}`);
  const runner = async () => {
    if (!queued) {
      const to = kind === 'fail-vs-confirmed-cancel' ? 'failed' : 'completed';
      const error = to === 'failed' ? { error: { code: 'chaos', message: 'failed on purpose' } } : {};
      seen.push({ who: `runner ${to}`, run: await driver!.to(to, error) });
      return;
    }
    let claimed: Runner;
    try {
      claimed = await Runner.claim(runId);
    } catch (err) {
      // The cancel ended the queued run first: the runner is told so and drops the job.
      if (isAppError(err) && err.code === 'already_settled') return;
      throw err;
    }
    try {
      await claimed.start();
      seen.push({ who: 'runner completed', run: await claimed.to('completed') });
    } catch (err) {
      // The cancel caught the run while it was starting: a runner stops and confirms instead.
      if (!isAppError(err) || err.code !== 'invalid_request' || (await runOf(runId)).status !== 'cancelling') throw err;
      seen.push({ who: 'runner confirming', run: await claimed.to('cancelled') });
    }
  };
  const canceller = async () => {
    const reply = await api(user, 'POST', `/v1/runs/${runId}/cancel`, undefined, { retry: true });
    const run = Run.safeParse(reply.body);
    if (!run.success || (reply.status !== 200 && reply.status !== 202)) {
      problem(`cancel → ${show(reply)}`);
      return;
    }
    seen.push({ who: `cancel ${reply.status}`, run: run.data });
    if (reply.status === 200 && !run.data.terminal) problem(`cancel answered 200 for a ${run.data.status} run`);
    if (reply.status === 202 && !run.data.terminal && run.data.status !== 'cancelling') {
      problem(`cancel answered 202 for a ${run.data.status} run`);
    }
    // The signalled runner stops its harness and confirms (the run may have ended meanwhile: then it learns how).
    if (kind !== 'complete-vs-cancel' && !queued && reply.status === 202) {
      seen.push({ who: 'runner confirming', run: await driver!.to('cancelled') });
    }
  };
  await Promise.all([jitter(20).then(runner), jitter(20).then(canceller)]);
}

/** One terminal state, one terminal event, every reader agreeing; then the follow-up. */
async function cancelProblems(race: CancelRace): Promise<string[]> {
  const { at, thread, seen, problems } = race;
  const runId = thread.run_id;
  const problem = (text: string) => problems.push(`${at}: ${text}`);
  const final = await runOf(runId);
  const events = await logOf(runId);
  const log = logProblems(events);
  if (!final.terminal) problem(`the run is still ${final.status} after both sides are done`);
  if (log.length) problem(`log: ${log.join('; ')} (${statusTrail(events).join(' ')})`);
  else if (loggedOutcome(events) !== final.status) {
    problem(`GET says ${final.status}, the log ends ${loggedOutcome(events)} (${statusTrail(events).join(' ')})`);
  }
  if (final.status === 'failed' ? final.error?.code !== 'chaos' : final.error !== null) {
    problem(`${final.status} with error ${JSON.stringify(final.error)}`);
  }
  for (const { who, run } of seen) {
    if (run.terminal && run.status !== final.status) problem(`${who} saw ${run.status}, the run is ${final.status}`);
  }
  if (!final.completed_at) problem('no completed_at');

  // The follow-up queued behind the run is admitted exactly once, after it; cancelling that queued
  // run ends it at once.
  try {
    const next = await poll(`${at}: the follow-up to be admitted`, async () => {
      const [control] = await controlsOf(thread.id);
      return control?.status === 'applied' ? control.created_run_id : undefined;
    });
    if (!next) throw new Error('applied without a run');
    if ((await liveRunOf(thread.id)) !== next) problem(`the follow-up's run ${next} is not the live run`);
    const admitted = await runOf(next);
    if (final.completed_at && admitted.created_at < final.completed_at) {
      problem(`the follow-up was admitted at ${admitted.created_at}, before the run ended at ${final.completed_at}`);
    }
    const cancel = await api(user, 'POST', `/v1/runs/${next}/cancel`, undefined, { retry: true });
    if ((cancel.status !== 202 && cancel.status !== 200) || Run.safeParse(cancel.body).data?.status !== 'cancelled') {
      problem(`cancelling the queued follow-up → ${show(cancel)}`);
    }
    const followLog = await logOf(next);
    if (logProblems(followLog).length) problem(`follow-up log: ${logProblems(followLog).join('; ')}`);
    if ((await controlsOf(thread.id)).length !== 1) problem('the follow-up control was duplicated');
    await poll(
      `${at}: the thread to be idle`,
      async () => (await liveRunOf(thread.id)) === null && (await threadOf(thread.id)).status === 'idle',
    );
  } catch (err) {
    const [controls, live] = await Promise.all([controlsOf(thread.id), liveRunOf(thread.id)]);
    problem(
      `${(err as Error).message} — thread ${thread.id}, run ${runId} (${statusTrail(events).join(' ')}), ` +
        `live run ${live}, controls ${JSON.stringify(controls.map((c) => [c.id, c.status, c.created_run_id]))}`,
    );
  }
  return problems;
}
