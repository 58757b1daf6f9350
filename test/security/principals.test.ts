import { join } from 'node:path';
import {
  CONSUMERS,
  ControlSubmission,
  DOMAIN_STREAM,
  domainEvents,
  inboxPrefix,
  InteractionList,
  MessagePage,
  rpc,
  RunEventPage,
  Run,
  SERVICES,
  subjects,
  Task,
  ThreadWithRun,
  WorkList,
  SealedReply,
  type EventDef,
  type NatsIdentity,
} from '@threadwork/contracts';
import {
  AppError,
  connectNats,
  createLogger,
  jetStreamOf,
  loadConfig,
  natsAuthWithSeed,
  publishJson,
  publishSignal,
  request,
  type NatsConnection,
} from '@threadwork/platform';
import { RunnerConfig, startRunner, type RunnerService } from '@threadwork/runner';
import {
  askUser,
  newClaimId,
  say,
  scriptsByPrompt,
  startFakeModel,
  uniqueId,
  type FakeModelServer,
  type FakeScript,
  RunDriver,
  waitFor,
} from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startStack, type Stack, type TestUser } from '../support/stack.js';

// What one service's NATS key still lets its holder do beyond that service's purpose, played
// against the real services, each connected as its own identity (test/security/nats.test.ts says
// what NATS itself refuses; this says what the services refuse of what NATS lets through). The
// attacker most likely holds the runner's key: the runner runs next to the agent's code.

const hasBinary = Boolean(inject('natsServerBin'));
const logger = createLogger({ service: 'principals-test', level: 'silent' });

/** Runs of this harness wait, queued, for the test to claim them as their runner; the real runner serves `codex`. */
const HELD = 'held';
const STEER_TEXT = 'Also write the tests.';
/** What the user steers a SEALED run with (a prefix of no script, so the run's own script answers it). */
const SEALED_STEER = 'Mind the secret';
/** The answer a SEALED run asks for, as an option (Codex offers options) or, where it allows, as free text. */
const SEALED_ANSWER = uniqueId('ANSWERMARK');
/** A turn that waits for its steer (or 20 s), then answers it. */
const scripts = new Map<string, FakeScript>([
  [
    'STEER',
    (req: { lastUserText: string }) =>
      req.lastUserText === STEER_TEXT
        ? [say('Writing the tests too.')]
        : { items: [say('Working on it…')], delayMs: 20_000 },
  ],
  [
    // Asks a question, then waits for a steer (or 20 s), then answers it.
    'SEALED',
    (req) => {
      if (req.lastUserText.startsWith(SEALED_STEER)) return [say('Steered.')];
      if (req.toolOutputsSinceLastUser.length === 0) {
        const options = [SEALED_ANSWER, 'none'].map((label) => ({ label, description: label }));
        return [askUser([{ id: 'code', header: 'Code', question: 'Which deploy code?', options }])];
      }
      return { items: [say('Working on it…')], delayMs: 20_000 };
    },
  ],
]);

let stack: Stack;
let fake: FakeModelServer;
let runner: RunnerService;
let alice: TestUser;
let bob: TestUser;
let repoId: number;
const connections: NatsConnection[] = [];

/** A connection with `identity`'s own key, as that service (or whoever stole its key) connects. */
async function connectAs(identity: NatsIdentity): Promise<NatsConnection> {
  const nc = await connectNats({
    servers: stack.nats.url,
    name: `as-${identity}`,
    logger,
    auth: natsAuthWithSeed(stack.nats.keys![identity].seed, identity),
  });
  connections.push(nc);
  return nc;
}

async function json<T>(res: Response, status: number, schema: { parse(v: unknown): T }): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return schema.parse(JSON.parse(text));
}

/**
 * A thread through the public API. Its run waits, queued, for the test to claim it as its runner
 * (no runner serves HELD), unless `harness` is the real runner's.
 */
async function createThread(user: TestUser, prompt = 'Add a changelog', harness = HELD) {
  const res = await stack.fetch('/v1/threads', {
    method: 'POST',
    user,
    body: JSON.stringify({ repository_id: repoId, prompt, harness }),
  });
  return json(res, 202, ThreadWithRun);
}

/** A steer of `threadId`'s live run through the public API, as its owner (or anyone) sends one. */
async function steer(user: TestUser, threadId: string, prompt: string) {
  const res = await stack.fetch(`/v1/threads/${threadId}/steer`, {
    method: 'POST',
    user,
    body: JSON.stringify({ prompt }),
  });
  return json(res, 202, ControlSubmission);
}

async function runOf(user: TestUser, runId: string) {
  return json(await stack.fetch(`/v1/runs/${runId}`, { user }), 200, Run);
}

async function eventsOf(user: TestUser, runId: string) {
  return json(await stack.fetch(`/v1/runs/${runId}/events?from=0&limit=1000`, { user }), 200, RunEventPage);
}

/** Waits until `durable` has handled every DOMAIN event up to `seq` (acted on it, or ignored it). */
async function handledUpTo(durable: string, seq: number): Promise<void> {
  const { jsm } = await jetStreamOf(stack.nc);
  await waitFor(`${durable} to handle DOMAIN up to ${seq}`, async () => {
    const info = await jsm.consumers.info(DOMAIN_STREAM.name, durable);
    return info.ack_floor.stream_seq >= seq && info.num_ack_pending === 0;
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Whether NATS itself refuses `nc` a request on `subject` (its grant does not name it). */
async function natsRefuses(nc: NatsConnection, subject: string): Promise<boolean> {
  try {
    await nc.request(subject, new TextEncoder().encode('{}'), { timeout: 5_000 });
    return false;
  } catch (err) {
    const message = `${(err as Error).message} ${String((err as { cause?: Error }).cause?.message ?? '')}`;
    return /permissions violation/i.test(message);
  }
}

/** The AppError a call failed with (fails the test if it succeeded). */
async function refusal(promise: Promise<unknown>): Promise<AppError> {
  const outcome = await promise.then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  if (outcome.ok) throw new Error(`expected a refusal, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.err).toBeInstanceOf(AppError);
  return outcome.err as AppError;
}

describe.skipIf(!hasBinary)('what one service’s NATS key can still do', () => {
  beforeAll(async () => {
    stack = await startStack({ HARNESSES: `codex,${HELD}` });
    [alice, bob] = await Promise.all([stack.createUser('alice'), stack.createUser('bob')]);
    repoId = await stack.addRepo('principals', { files: { 'README.md': '# Principals\n' } });
    fake = await startFakeModel(scriptsByPrompt(scripts));
    runner = await startRunner(
      loadConfig(RunnerConfig, {
        ...stack.env,
        ...stack.nats.env('runner'),
        SANDBOX_ROOT: join(stack.reposDir, uniqueId('.sandboxes-')),
        RUNNER_ID: uniqueId('runner-'),
        MODEL_BASE_URL: fake.baseUrl,
        MODEL_API_KEY: 'sk-test',
        RUN_POLL_MS: '300',
      }),
    );
  });
  afterAll(async () => {
    for (const nc of connections) await nc.close();
    await runner?.stop();
    await fake?.close();
    await stack?.stop();
  });

  describe('the runner’s key, for a run another runner holds', () => {
    it('cannot move it, append to its log or ask its owner a question: the claim, not the attempt number, fences', async () => {
      const runnerKey = await connectAs('runner');
      const thread = await createThread(alice);
      // The legitimate runner (same NATS identity: every runner shares it) claims the run.
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      await holder.start();

      // The attacker knows the run id (jobs name it) and can guess the attempt (0), not the claim.
      for (const attempt of [0, 1]) {
        const forged = new RunDriver(runnerKey, thread.run_id, attempt, newClaimId());
        expect((await refusal(forged.to('completed'))).code).toBe('already_settled');
        expect((await refusal(forged.say('FORGED: the work is done'))).code).toBe('already_settled');
        expect(
          (
            await refusal(
              forged.ask([{ id: 'q', header: 'Q', question: 'FORGED?', isOther: false, isSecret: false, options: [] }]),
            )
          ).code,
        ).toBe('already_settled');
      }
      expect(await runOf(alice, thread.run_id)).toMatchObject({ status: 'running', attempt: 0 });
      expect(JSON.stringify((await eventsOf(alice, thread.run_id)).events)).not.toContain('FORGED');

      // The holder goes on as before.
      await holder.say('the real reply');
      await holder.to('completed');
      const page = await eventsOf(alice, thread.run_id);
      expect(page).toMatchObject({ status: 'completed', terminal: true });
      expect(JSON.stringify(page.events)).toContain('the real reply');
      expect(JSON.stringify(page.events)).not.toContain('FORGED');
    });
  });

  describe('the runner’s key, for a run the real runner is working', () => {
    it('cannot claim it from its live runner: refused, retryable, however often; the run completes as its runner ends it', async () => {
      const runnerKey = await connectAs('runner');
      const prompt = 'STEER while another runner key claims the run';
      const thread = await createThread(alice, prompt, 'codex');
      await waitFor('the model to be asked', async () => fake.requests.some((r) => r.userTexts[0] === prompt));
      expect(await runOf(alice, thread.run_id)).toMatchObject({ status: 'running', attempt: 0 });

      // More claims than the run has attempts: none takes the run over, none spends an attempt.
      const claims = Array.from({ length: 5 }, () => newClaimId());
      for (const claim_id of claims) {
        const claimed = request(runnerKey, rpc.runs.claim, { run_id: thread.run_id, runner_id: 'thief', claim_id });
        const refused = await refusal(claimed);
        expect(refused).toMatchObject({ code: 'unavailable', retryable: true });
        expect(refused.details?.retry_after_ms).toBeGreaterThan(0);
      }
      // Nor may the refused claims act for the run, at any attempt they might have got.
      for (const [attempt, claim_id] of claims.entries()) {
        const forged = new RunDriver(runnerKey, thread.run_id, attempt, claim_id);
        expect((await refusal(forged.say('FORGED: the work is done'))).code).toBe('already_settled');
        expect((await refusal(forged.to('completed'))).code).toBe('already_settled');
      }
      expect(await runOf(alice, thread.run_id)).toMatchObject({ status: 'running', attempt: 0, terminal: false });

      await json(
        await stack.fetch(`/v1/threads/${thread.id}/steer`, {
          method: 'POST',
          user: alice,
          body: JSON.stringify({ prompt: STEER_TEXT }),
        }),
        202,
        ControlSubmission,
      );
      await waitFor('the run to end', async () => (await runOf(alice, thread.run_id)).terminal);
      expect(await runOf(alice, thread.run_id)).toMatchObject({ status: 'completed', attempt: 0, error: null });
      const page = await eventsOf(alice, thread.run_id);
      expect(JSON.stringify(page.events)).toContain('Writing the tests too.');
      expect(JSON.stringify(page.events)).not.toContain('FORGED');
      expect(fake.requests.filter((r) => r.userTexts[0] === prompt).at(-1)?.userTexts).toEqual([prompt, STEER_TEXT]);
    });
  });

  describe('reads of a user’s data', () => {
    it('the runner’s key reads no run for an owner: only the run it claimed, by that claim', async () => {
      const runnerKey = await connectAs('runner');
      for (const subject of [
        SERVICES.runs.subjects.get,
        SERVICES.runs.subjects.getMany,
        SERVICES.runs.subjects.eventsPage,
        SERVICES.runs.subjects.interactionGet,
        SERVICES.runs.subjects.interactionList,
      ]) {
        expect(await natsRefuses(runnerKey, subject), subject).toBe(true);
      }
      const thread = await createThread(alice);
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      await holder.start();
      const read = (attempt: number, claim_id: string) =>
        request(runnerKey, rpc.runs.attemptState, { run_id: thread.run_id, attempt, claim_id });
      // Another claim id, for the attempt that is or for one that is not: as if the run did not exist.
      expect((await refusal(read(0, newClaimId()))).code).toBe('not_found');
      expect((await refusal(read(1, newClaimId()))).code).toBe('not_found');
      // The holder reads where its run stands, and nothing of the owner's data.
      expect(await read(0, holder.claimId)).toEqual({ status: 'running', attempt: 0, terminal: false });
      await holder.to('completed');
      expect(await read(0, holder.claimId)).toEqual({ status: 'completed', attempt: 0, terminal: true });
    });

    it('a key that reads for owners reads nothing for no one, and another owner’s run or question is not found', async () => {
      const [threadsKey, gatewayKey, runnerKey] = await Promise.all([
        connectAs('threads'),
        connectAs('gateway'),
        connectAs('runner'),
      ]);
      const thread = await createThread(alice);
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      await holder.start();
      const asked = await holder.ask([
        { id: 'q', header: 'Q', question: 'Which?', isOther: false, isSecret: false, options: [] },
      ]);
      const run_id = thread.run_id;
      const page = { run_id, from: 1, limit: 100 };

      // Without an owner: refused outright, whoever asks.
      const ownerless = { run_id, interaction_id: asked.id, from: 1, limit: 100 } as never;
      expect((await refusal(request(threadsKey, rpc.runs.get, ownerless))).code).toBe('invalid_request');
      expect((await refusal(request(gatewayKey, rpc.runs.get, ownerless))).code).toBe('invalid_request');
      expect((await refusal(request(gatewayKey, rpc.runs.eventsPage, ownerless))).code).toBe('invalid_request');
      expect((await refusal(request(gatewayKey, rpc.runs.interactionGet, ownerless))).code).toBe('invalid_request');
      // For another owner: not found.
      const asBob = { owner_id: bob.id };
      expect((await refusal(request(threadsKey, rpc.runs.get, { ...asBob, run_id }))).code).toBe('not_found');
      expect((await refusal(request(gatewayKey, rpc.runs.eventsPage, { ...asBob, ...page }))).code).toBe('not_found');
      const bobsQuestion = request(gatewayKey, rpc.runs.interactionGet, { ...asBob, interaction_id: asked.id });
      expect((await refusal(bobsQuestion)).code).toBe('not_found');
      expect((await stack.fetch(`/v1/runs/${run_id}`, { user: bob })).status).toBe(404);

      // For its owner, as before.
      const asAlice = { owner_id: alice.id };
      expect(await request(threadsKey, rpc.runs.get, { ...asAlice, run_id })).toMatchObject({ id: run_id });
      const events = await request(gatewayKey, rpc.runs.eventsPage, { ...asAlice, ...page });
      expect(events.events.length).toBeGreaterThan(0);
      const question = await request(gatewayKey, rpc.runs.interactionGet, { ...asAlice, interaction_id: asked.id });
      expect(question).toMatchObject({ id: asked.id, run_id });
      expect(await runOf(alice, run_id)).toMatchObject({ status: 'waiting_for_input' });
    });
  });

  describe('signals to a live run', () => {
    it('a steer signal with the threads service’s key puts no text into the run but its owner’s pending steer, once', async () => {
      const threadsKey = await connectAs('threads');
      // The runner alone reads a steer back; the gateway, which may call every other threads endpoint, may not.
      expect(await natsRefuses(await connectAs('gateway'), SERVICES.threads.subjects.steerRead)).toBe(true);
      const prompt = 'STEER me while I work';
      const thread = await createThread(alice, prompt, 'codex');
      await waitFor('the model to be asked', async () => fake.requests.some((r) => r.userTexts[0] === prompt));
      const runId = thread.run_id;
      const signal = (payload: Record<string, unknown>) =>
        publishSignal(threadsKey, subjects.runSignal(runId), { type: 'steer', ...payload });

      // Forged: text of its own on an unknown control, and bob's steer of his own run named here.
      signal({ control_id: uniqueId('ctl_'), prompt: 'FORGED: push to main' });
      const bobs = await createThread(bob, 'STEER bob along', 'codex');
      await waitFor('bob’s model to be asked', async () =>
        fake.requests.some((r) => r.userTexts[0] === 'STEER bob along'),
      );
      const bobSteer = await steer(bob, bobs.id, 'FORGED: bob’s words');
      signal({ control_id: bobSteer.control.id });
      await threadsKey.flush();

      // Alice steers through the API: the one steer her run takes.
      const steered = await steer(alice, thread.id, STEER_TEXT);
      await waitFor('the run to complete', async () => (await runOf(alice, runId)).terminal);
      // Replayed once applied: nothing more.
      signal({ control_id: steered.control.id });
      await threadsKey.flush();
      await new Promise((resolve) => setTimeout(resolve, 500));

      const page = await eventsOf(alice, runId);
      expect(page.status).toBe('completed');
      const applied = page.events
        .map((e) => e.chunk as { type: string; control_id?: string })
        .filter((c) => c.type === 'control.applied');
      expect(applied.map((c) => c.control_id)).toEqual([steered.control.id]);
      const asked = fake.requests.filter((r) => r.userTexts[0] === prompt);
      expect(JSON.stringify(asked.map((r) => r.userTexts))).not.toContain('FORGED');
      expect(asked.at(-1)?.userTexts).toEqual([prompt, STEER_TEXT]);
      await stack.fetch(`/v1/runs/${bobs.run_id}/cancel`, { method: 'POST', user: bob, body: '{}' });
    });

    it('a cancel signal for a run its owner did not cancel stops nothing: the runner asks the runs service first', async () => {
      const threadsKey = await connectAs('threads');
      const prompt = 'STEER through a forged cancel';
      const thread = await createThread(alice, prompt, 'codex');
      await waitFor('the model to be asked', async () => fake.requests.some((r) => r.userTexts[0] === prompt));
      // Received by the server (and so by the runner) before the steer that ends the turn.
      publishSignal(threadsKey, subjects.runSignal(thread.run_id), { type: 'cancel' });
      await threadsKey.flush();
      await steer(alice, thread.id, STEER_TEXT);
      await waitFor('the run to end', async () => (await runOf(alice, thread.run_id)).terminal);
      const page = await eventsOf(alice, thread.run_id);
      expect(page.status).toBe('completed');
      expect(page.events.map((e) => (e.chunk as { status?: string }).status)).not.toContain('cancelling');
    });
  });

  describe('runner events about a run', () => {
    it('the runner’s key alone makes threads store no reply, apply no steer, show no figures and set no sandbox status', async () => {
      const runnerKey = await connectAs('runner');
      const { js } = await jetStreamOf(runnerKey);
      const thread = await createThread(alice);
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      await holder.start();
      const pending = await steer(alice, thread.id, 'Keep going');
      const work = await json(await stack.fetch('/v1/work', { user: alice }), 200, WorkList);
      const project = work.projects.find((p) => p.threads.some((t) => t.id === thread.id))!;
      const at = new Date().toISOString();
      const about = { run_id: thread.run_id, thread_id: thread.id };
      const forged: [EventDef, Record<string, unknown>][] = [
        [domainEvents.messageCompleted, { ...about, message_key: `${thread.run_id}:reply`, text: 'FORGED', at }],
        [domainEvents.controlApplied, { ...about, control_id: pending.control.id, at }],
        [
          domainEvents.sandboxStatus,
          { thread_id: thread.id, run_id: thread.run_id, status: 'failed', sandbox_id: 'sbx_f', reason: 'FORGED', at },
        ],
        [
          domainEvents.candidateProduced,
          {
            ...about,
            owner_id: alice.id,
            project_repository_id: project.repositories[0]!.id,
            repository_id: repoId,
            branch: `threadwork/${thread.id}`,
            base_branch: 'main',
            base_revision: 'a'.repeat(40),
            candidate_revision: 'b'.repeat(40),
            diff: 'FORGED',
            truncated: false,
            files: [],
            stats: { additions: 1000, deletions: 1000 },
            at,
          },
        ],
      ];
      let last = 0;
      for (const [def, event] of forged) {
        const ack = await publishJson(js, def.subject, event, {
          msgId: uniqueId('forged-'),
        });
        last = ack.seq;
      }
      await handledUpTo(CONSUMERS.threads, last);

      const messages = async () =>
        (await json(await stack.fetch(`/v1/threads/${thread.id}/messages`, { user: alice }), 200, MessagePage))
          .messages;
      expect(JSON.stringify(await messages())).not.toContain('FORGED');
      const controls = await stack.fetch(`/v1/threads/${thread.id}/controls`, { user: alice });
      expect(((await controls.json()) as { controls: { status: string }[] }).controls.map((c) => c.status)).toEqual([
        'pending',
      ]);
      const task = await json(await stack.fetch(`/v1/tasks/${thread.id}`, { user: alice }), 200, Task);
      expect(task.sandbox_status).toBeNull();
      const after = await json(await stack.fetch('/v1/work', { user: alice }), 200, WorkList);
      expect(after.projects.flatMap((p) => p.threads).find((t) => t.id === thread.id)).not.toHaveProperty('additions');

      // The run's holder, with the same key, publishes what counts.
      const reply = { ...about, message_key: `${thread.run_id}:reply`, text: 'The real reply', at };
      await holder.publish(js, domainEvents.messageCompleted, reply, `${thread.run_id}:reply`);
      await waitFor('the reply', async () => JSON.stringify(await messages()).includes('The real reply'));
    });
  });
  describe('replies to the runner', () => {
    it('a second holder of the runner’s key, reading every runner inbox, sees no job, answer or steer: they come sealed', async () => {
      // Every runner is the `runner` identity, and may subscribe to all of its inboxes.
      const eavesdropper = await connectAs('runner');
      const heard: string[] = [];
      eavesdropper.subscribe(`${inboxPrefix('runner')}.>`, {
        callback: (_err, msg) => {
          const headers = msg.headers ? [...msg.headers.keys()].map((k) => `${k}: ${msg.headers!.get(k)}`) : [];
          heard.push([msg.subject, ...headers, Buffer.from(msg.data).toString('latin1')].join('\n'));
        },
      });
      await eavesdropper.flush();

      const marker = uniqueId('PROMPTMARK');
      const answer = SEALED_ANSWER;
      const steerText = `${SEALED_STEER} ${uniqueId('STEERMARK')}`;
      const prompt = `SEALED ${marker}`;
      const thread = await json(
        await stack.fetch('/v1/threads', {
          method: 'POST',
          user: alice,
          body: JSON.stringify({ repository_id: repoId, prompt, harness: 'codex', collaboration_mode: 'plan' }),
        }),
        202,
        ThreadWithRun,
      );
      await waitFor('the question', async () => (await runOf(alice, thread.run_id)).status === 'waiting_for_input');
      const { interactions } = await json(
        await stack.fetch(`/v1/threads/${thread.id}/interactions?status=pending`, { user: alice }),
        200,
        InteractionList,
      );
      const [question] = interactions[0]!.questions;
      const res = await stack.fetch(`/v1/interactions/${interactions[0]!.id}/answer`, {
        method: 'POST',
        user: alice,
        body: JSON.stringify({
          action: 'answer',
          answers: {
            code: question?.isOther
              ? { kind: 'text', text: `${answer} typed` }
              : { kind: 'options', optionIds: [answer] },
          },
        }),
      });
      expect(res.status, await res.text()).toBe(200);
      await waitFor('the answer to reach the model', async () =>
        fake.requests.some(
          (r) => r.userTexts[0] === prompt && JSON.stringify(r.toolOutputsSinceLastUser).includes(answer),
        ),
      );
      await json(
        await stack.fetch(`/v1/threads/${thread.id}/steer`, {
          method: 'POST',
          user: alice,
          body: JSON.stringify({ prompt: steerText }),
        }),
        202,
        ControlSubmission,
      );
      await waitFor('the run to complete', async () => (await runOf(alice, thread.run_id)).terminal);
      expect((await runOf(alice, thread.run_id)).status).toBe('completed');
      // The runner read all three: the prompt, the answer and the steer reached the model.
      expect(fake.requests.filter((r) => r.userTexts[0] === prompt).at(-1)?.userTexts).toEqual([prompt, steerText]);

      await eavesdropper.flush();
      const all = heard.join('\n');
      // It heard the runner's replies (sealed ones among them), and none of what they carried.
      for (const secret of [marker, answer, steerText]) expect(all).not.toContain(secret);
      expect(heard.some((m) => SealedReply.safeParse(safeJson(m.slice(m.lastIndexOf('\n') + 1))).success)).toBe(true);
    });

    it('a sealed endpoint answers a request without a reply key with a refusal, and does nothing', async () => {
      const runnerKey = await connectAs('runner');
      const thread = await createThread(alice, `Unsealed ${uniqueId('PROMPTMARK')}`);
      const ask = async (subject: string, payload: unknown) =>
        JSON.parse(
          new TextDecoder().decode(
            (await runnerKey.request(subject, new TextEncoder().encode(JSON.stringify(payload)), { timeout: 10_000 }))
              .data,
          ),
        ) as unknown;
      const claimId = newClaimId();
      for (const [subject, payload] of [
        [SERVICES.runs.subjects.claim, { run_id: thread.run_id, runner_id: 'unsealed', claim_id: claimId }],
        [SERVICES.repohost.subjects.token, { run_id: thread.run_id, claim_id: claimId, repository_ids: [repoId] }],
        [
          SERVICES.runs.subjects.interactionSettlement,
          { run_id: thread.run_id, claim_id: claimId, interaction_id: 'int_x' },
        ],
        [SERVICES.threads.subjects.steerRead, { run_id: thread.run_id, claim_id: claimId, control_id: 'ctl_x' }],
      ] as const) {
        expect(await ask(subject, payload), subject).toMatchObject({
          ok: false,
          error: { code: 'invalid_request', message: expect.stringContaining('sealed') },
        });
      }
      // The refused claim took nothing: the run still waits for a runner, and a sealed claim takes it.
      expect((await runOf(alice, thread.run_id)).status).toBe('queued');
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      expect(holder.attempt).toBe(0);
    });
  });
});
