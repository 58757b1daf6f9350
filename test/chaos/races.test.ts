import { AnswerResult, Interaction, TaskList, ThreadWithRun } from '@threadwork/contracts';
import { uniqueId, question } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { logProblems, statusTrail } from './support/api.js';
import {
  allPages,
  allWorkThreads,
  api,
  chunkOf,
  cluster,
  create,
  errorCode,
  liveRunOf,
  logOf,
  mapLimit,
  messagesOf,
  read,
  Runner,
  runOf,
  show,
  useRaceCluster,
  user,
} from './support/race-api.js';
import { drainThread, latestRunProblems, raceOneThread, threadProblems } from './support/thread-race.js';
import type { EndKind } from './support/thread-race.js';
import { CANCEL_CASES, cancelProblems, prepareCancel, raceCancel } from './support/cancel-race.js';

// The "exactly one wins" decisions of the API issue, raced at scale against the real services as
// separate processes on FerretDB (which does not make conditional updates atomic), CHAOS_ROUNDS
// rounds each. No runner is started: the test stands in for it through the runs service's
// internal API (claim, transition, interactions: what RunDriver does), so it decides when each
// run ends. Everything asserted is read back through the public HTTP API.

const ROUNDS = Number(process.env.CHAOS_ROUNDS ?? 3);
const THREADS = 20;
/** A round of the larger scenarios takes well under a minute here; far more is allowed. */
const TIMEOUT_MS = Math.max(300_000, ROUNDS * 120_000);

useRaceCluster();

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
