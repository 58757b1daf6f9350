import { jetstream } from '@nats-io/jetstream';
import { rpc, RunSignal, subjects } from '@threadwork/contracts';
import { createLogger, decodeJson, loadConfig, request } from '@threadwork/platform';
import { baseServiceEnv, newClaimId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunsConfig } from '../src/index.js';
import type { RunsContext } from '../src/flows/context.js';
import { createInteraction } from '../src/flows/interactions.js';
import { moveRun } from '../src/flows/lifecycle.js';
import { appendEvents } from '../src/flows/runner-moves.js';
import { createEventLog } from '../src/store/event-log.js';
import {
  admission,
  failure,
  getRun,
  type Harness,
  readLog,
  runningRun,
  silence,
  startHarness,
  statusLog,
} from './helpers.js';

describe('run lifecycle', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ RUN_MAX_ATTEMPTS: '3' });
  });
  afterAll(async () => {
    await h?.stop();
  });

  const admit = async () => {
    const req = admission();
    const { run } = await request(h.nc, rpc.runs.admit, req);
    return { run, owner: req.owner_id, thread_id: req.thread_id };
  };

  it('moves a run through claim, running and completion, logging each move', async () => {
    const { run, owner, thread_id } = await admit();
    const claim_id = newClaimId();
    const claim = await request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-a', claim_id });
    expect(claim.attempt).toBe(0);
    expect(claim.run).toMatchObject({ status: 'starting', attempt: 0 });
    expect(claim.job).toMatchObject({ run_id: run.id, thread_id, owner_id: owner });

    const running = await request(h.nc, rpc.runs.transition, {
      run_id: run.id,
      attempt: 0,
      claim_id,
      to: 'running',
      sandbox_id: 'sbx_1',
    });
    expect(running).toMatchObject({ status: 'running', sandbox_id: 'sbx_1' });
    expect(running.started_at).not.toBeNull();

    const done = await request(h.nc, rpc.runs.transition, {
      run_id: run.id,
      attempt: 0,
      claim_id,
      to: 'completed',
      usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
    });
    expect(done).toMatchObject({ status: 'completed', terminal: true, usage: { totalTokens: 15 }, error: null });
    expect(done.completed_at).not.toBeNull();

    const log = await readLog(h, run.id);
    expect(log.map((e) => e.chunk)).toEqual([
      { type: 'run.status', status: 'queued', attempt: 0 },
      { type: 'run.status', status: 'starting', previous: 'queued', attempt: 0 },
      { type: 'run.status', status: 'running', previous: 'starting', attempt: 0 },
      { type: 'run.status', status: 'completed', previous: 'running', attempt: 0 },
    ]);
    expect((await request(h.nc, rpc.runs.live, { owner_id: owner, thread_id })).run).toBeNull();
  });

  it('treats a repeated move as done and refuses an illegal one', async () => {
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const again = await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'running' });
    expect(again.status).toBe('running');
    expect(await statusLog(h, run.id)).toEqual(['queued', 'starting', 'running']);

    const err = await failure(request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'queued' }));
    expect(err.code).toBe('invalid_request');
    // A run nobody claimed yet is held by no claim: no one moves it.
    const early = await admit();
    const unclaimed = { run_id: early.run.id, attempt: 0, claim_id: newClaimId(), to: 'running' as const };
    expect((await failure(request(h.nc, rpc.runs.transition, unclaimed))).code).toBe('already_settled');
  });

  it('records a failure with its error and frees the thread', async () => {
    const { run, owner, thread_id, attempt, claim_id } = await runningRun(h.nc);
    const failed = await request(h.nc, rpc.runs.transition, {
      run_id: run.id,
      attempt,
      claim_id,
      to: 'failed',
      error: { code: 'harness_crashed', message: 'codex exited with 1', detail: 'stderr tail' },
    });
    expect(failed).toMatchObject({ status: 'failed', terminal: true, error: { code: 'harness_crashed' } });
    const page = await request(h.nc, rpc.runs.eventsPage, { owner_id: owner, run_id: run.id, from: 1, limit: 100 });
    expect(page).toMatchObject({ status: 'failed', terminal: true, error: { code: 'harness_crashed' } });
    expect(page.events.at(-1)?.chunk).toMatchObject({ status: 'failed', error: { code: 'harness_crashed' } });
    expect((await request(h.nc, rpc.runs.live, { owner_id: owner, thread_id })).run).toBeNull();
  });

  it('claims attempt 0 first, the next attempt on redelivery, and fails the run once attempts run out', async () => {
    const { run } = await admit();
    const firstClaim = newClaimId();
    const first = await request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-a', claim_id: firstClaim });
    expect(first.attempt).toBe(0);
    await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt: 0, claim_id: firstClaim, to: 'running' });

    // While its holder is heard from, the run is not taken over: the claim is told to come back later.
    for (let i = 0; i < 5; i++) {
      const held = await failure(
        request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-x', claim_id: newClaimId() }),
      );
      expect(held).toMatchObject({ code: 'unavailable', retryable: true });
      expect(held.details?.retry_after_ms).toBeGreaterThan(0);
    }
    expect(await getRun(h, run.id)).toMatchObject({ status: 'running', attempt: 0 });

    await silence(h, run.id);
    const second = await request(h.nc, rpc.runs.claim, {
      run_id: run.id,
      runner_id: 'runner-b',
      claim_id: newClaimId(),
    });
    expect(second.attempt).toBe(1);
    expect(second.run).toMatchObject({ status: 'running', attempt: 1 });

    await silence(h, run.id);
    const third = await request(h.nc, rpc.runs.claim, {
      run_id: run.id,
      runner_id: 'runner-c',
      claim_id: newClaimId(),
    });
    expect(third.attempt).toBe(2);

    await silence(h, run.id);
    const err = await failure(
      request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-d', claim_id: newClaimId() }),
    );
    expect(err.code).toBe('already_settled');
    const failed = await getRun(h, run.id);
    expect(failed).toMatchObject({ status: 'failed', terminal: true, error: { code: 'runner_lost' } });
    expect(await statusLog(h, run.id)).toEqual(['queued', 'starting', 'running', 'failed']);

    expect(
      (await failure(request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-e', claim_id: newClaimId() })))
        .code,
    ).toBe('already_settled');
    expect(
      (await failure(request(h.nc, rpc.runs.claim, { run_id: 'run_missing', runner_id: 'r', claim_id: newClaimId() })))
        .code,
    ).toBe('not_found');
  });

  it('lets the next claim take a run at once when its holder hands it back, and only its holder may', async () => {
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const release = (claim: string) => request(h.nc, rpc.runs.release, { run_id: run.id, attempt, claim_id: claim });
    expect((await failure(release(newClaimId()))).code).toBe('already_settled');
    const held = await failure(
      request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-b', claim_id: newClaimId() }),
    );
    expect(held.code).toBe('unavailable');

    expect(await release(claim_id)).toEqual({ released: true });
    // A poll of the holder still in flight does not take the lease back.
    await request(h.nc, rpc.runs.attemptState, { run_id: run.id, attempt, claim_id });
    const next = await request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-b', claim_id: newClaimId() });
    expect(next).toMatchObject({ attempt: 1, run: { status: 'running', attempt: 1 } });
    expect((await failure(release(claim_id))).code).toBe('already_settled');
  });

  it('gives a retried claim the attempt its first try made, applied or still under way', async () => {
    // Retried after the first try was applied (its answer lost): the same attempt, nothing burnt.
    const { run } = await admit();
    const claim = { run_id: run.id, runner_id: 'runner-a', claim_id: newClaimId() };
    const first = await request(h.nc, rpc.runs.claim, claim);
    const retry = await request(h.nc, rpc.runs.claim, claim);
    expect([first.attempt, retry.attempt]).toEqual([0, 0]);
    expect(retry.run).toMatchObject({ status: 'starting', attempt: 0 });
    await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt: 0, claim_id: claim.claim_id, to: 'running' });
    expect(await request(h.nc, rpc.runs.claim, claim)).toMatchObject({ attempt: 0, run: { status: 'running' } });
    // A different claim (a redelivery to another runner, its holder silent) takes the next attempt over.
    await silence(h, run.id);
    const other = await request(h.nc, rpc.runs.claim, {
      run_id: run.id,
      runner_id: 'runner-b',
      claim_id: newClaimId(),
    });
    expect(other.attempt).toBe(1);
    // …and fences the first claim: its retry now learns the run moved on.
    expect((await failure(request(h.nc, rpc.runs.claim, claim))).code).toBe('already_settled');

    // Retried while the first try is still under way: both tries answer the one attempt.
    for (let i = 0; i < 5; i++) {
      const { run: raced } = await admit();
      const twin = { run_id: raced.id, runner_id: 'runner-a', claim_id: newClaimId() };
      const answers = await Promise.all([request(h.nc, rpc.runs.claim, twin), request(h.nc, rpc.runs.claim, twin)]);
      expect(answers.map((a) => a.attempt)).toEqual([0, 0]);
      expect(await getRun(h, raced.id)).toMatchObject({ status: 'starting', attempt: 0 });
    }
  });

  it('lets one of several runners racing for the same attempt win it', async () => {
    // The first claim racing a takeover by the next attempt is a narrow window: many rounds, three runners.
    for (let i = 0; i < 40; i++) {
      const { run } = await admit();
      const claims = ['runner-a', 'runner-b', 'runner-c'].map((runner_id) => ({
        run_id: run.id,
        runner_id,
        claim_id: newClaimId(),
      }));
      const outcomes = await Promise.allSettled(claims.map((claim) => request(h.nc, rpc.runs.claim, claim)));
      const won = outcomes.flatMap((o, n) =>
        o.status === 'fulfilled' ? [{ ...o.value, claim_id: claims[n]!.claim_id }] : [],
      );
      expect(won.length).toBeGreaterThanOrEqual(1);
      // A runner that read the run after the winner's claim takes the next attempt (a redelivery);
      // two runners never hold the same attempt.
      expect(new Set(won.map((c) => c.attempt)).size).toBe(won.length);
      for (const o of outcomes) {
        // Lost the attempt, or found it held by the winner's live lease.
        if (o.status === 'rejected') expect(['already_settled', 'unavailable']).toContain(o.reason.code);
      }
      // Whichever attempt the run shows is held by one of the winners, and only that one can move
      // it: every other winner is fenced at its first move. (On MongoDB that is always the latest
      // attempt; on FerretDB a conditional update is not atomic (DESIGN.md, "Exclusivity"), so the
      // first claim's write may land after the takeover's, and then the first claim holds the run.)
      const current = await getRun(h, run.id);
      expect(won.map((c) => c.attempt)).toContain(current.attempt);
      for (const claim of won.filter((c) => c.attempt !== current.attempt)) {
        const move = { run_id: run.id, attempt: claim.attempt, claim_id: claim.claim_id, to: 'running' as const };
        expect((await failure(request(h.nc, rpc.runs.transition, move))).code).toBe('already_settled');
      }
      const holder = won.find((c) => c.attempt === current.attempt)!;
      const moved = await request(h.nc, rpc.runs.transition, {
        run_id: run.id,
        attempt: current.attempt,
        claim_id: holder.claim_id,
        to: 'running',
      });
      expect(moved).toMatchObject({ status: 'running', attempt: current.attempt });
    }
  });

  it('fences a runner whose attempt was taken over out of moves and appends', async () => {
    const { run, claim_id } = await runningRun(h.nc);
    await silence(h, run.id);
    const takeoverClaim = newClaimId();
    const takeover = await request(h.nc, rpc.runs.claim, {
      run_id: run.id,
      runner_id: 'runner-b',
      claim_id: takeoverClaim,
    });
    expect(takeover.attempt).toBe(1);

    const move = await failure(
      request(h.nc, rpc.runs.transition, { run_id: run.id, attempt: 0, claim_id, to: 'completed' }),
    );
    expect(move.code).toBe('already_settled');
    expect(move.message).toMatch(/stale attempt/);
    const append = await failure(
      request(h.nc, rpc.runs.append, {
        run_id: run.id,
        attempt: 0,
        claim_id,
        events: [{ key: 'e1', chunk: { type: 'message.delta', item_id: 'i', delta: 'x' } }],
      }),
    );
    expect(append.code).toBe('already_settled');

    const appended = await request(h.nc, rpc.runs.append, {
      run_id: run.id,
      attempt: 1,
      claim_id: takeoverClaim,
      events: [{ key: 'e1', chunk: { type: 'message.delta', item_id: 'i', delta: 'x' } }],
    });
    expect(appended.sequences).toHaveLength(1);
    const done = await request(h.nc, rpc.runs.transition, {
      run_id: run.id,
      attempt: 1,
      claim_id: takeoverClaim,
      to: 'completed',
    });
    expect(done.status).toBe('completed');
    expect(
      (
        await failure(
          request(h.nc, rpc.runs.append, {
            run_id: run.id,
            attempt: 1,
            claim_id: takeoverClaim,
            events: [{ key: 'late', chunk: { type: 'message.delta', item_id: 'i', delta: 'y' } }],
          }),
        )
      ).code,
    ).toBe('already_settled');
  });

  it('refuses moves, appends and questions from a caller that did not make the attempt, whatever attempt it names', async () => {
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const other = await runningRun(h.nc);
    const event = [{ key: 'forged', chunk: { type: 'message.completed', item_id: 'i', text: 'forged' } }];
    const question = { id: 'q', header: 'Q', question: '?', isOther: false, isSecret: false, options: [] };
    // A claim id of nobody's, and the holder of another run presenting its own: the current
    // attempt number (which anyone can guess) is not enough.
    for (const stranger of [newClaimId(), other.claim_id]) {
      const fence = { run_id: run.id, attempt, claim_id: stranger };
      const moved = await failure(request(h.nc, rpc.runs.transition, { ...fence, to: 'completed' }));
      expect(moved).toMatchObject({
        code: 'already_settled',
        message: expect.stringMatching(/not held by this claim/),
      });
      expect((await failure(request(h.nc, rpc.runs.append, { ...fence, events: event }))).code).toBe('already_settled');
      const asked = request(h.nc, rpc.runs.interactionCreate, {
        ...fence,
        key: 'forged',
        kind: 'question',
        questions: [question],
      });
      expect((await failure(asked)).code).toBe('already_settled');
    }
    const chunks = (await readLog(h, run.id)).map((e) => e.chunk as { type: string });
    expect(chunks.map((c) => c.type)).toEqual(['run.status', 'run.status', 'run.status']);
    expect(await getRun(h, run.id)).toMatchObject({ status: 'running', attempt });
    // The holder goes on as before.
    const appended = await request(h.nc, rpc.runs.append, { run_id: run.id, attempt, claim_id, events: event });
    expect(appended.sequences).toHaveLength(1);
    expect(
      await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' }),
    ).toMatchObject({ status: 'completed' });
  });

  it('cancels a running run through cancelling, signalling its runner, until the runner ends it', async () => {
    const { run, owner, attempt, claim_id } = await runningRun(h.nc);
    const signals = h.nc.subscribe(subjects.runSignal(run.id), { max: 1 });
    const cancel = await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id });
    expect(cancel).toMatchObject({ requested: true, run: { status: 'cancelling', terminal: false } });
    for await (const msg of signals) expect(RunSignal.parse(decodeJson(msg.data))).toEqual({ type: 'cancel' });

    const again = await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id });
    expect(again).toMatchObject({ requested: true, run: { status: 'cancelling' } });

    const cancelled = await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'cancelled' });
    expect(cancelled).toMatchObject({ status: 'cancelled', terminal: true });
    expect(await statusLog(h, run.id)).toEqual(['queued', 'starting', 'running', 'cancelling', 'cancelled']);
    const after = await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id });
    expect(after).toMatchObject({ requested: false, run: { status: 'cancelled' } });
  });

  it('finishes a cancellation whose runner went away when its job comes back', async () => {
    const { run, owner } = await runningRun(h.nc);
    await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id });
    // A claim while the runner is still heard from leaves the cancellation to it.
    const held = await failure(
      request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-b', claim_id: newClaimId() }),
    );
    expect(held.code).toBe('unavailable');
    expect(await getRun(h, run.id)).toMatchObject({ status: 'cancelling', terminal: false });
    await silence(h, run.id);
    const err = await failure(
      request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-b', claim_id: newClaimId() }),
    );
    expect(err.code).toBe('already_settled');
    expect(await getRun(h, run.id)).toMatchObject({
      status: 'cancelled',
      terminal: true,
    });
  });

  it('ends a run exactly once when cancellation races completion', async () => {
    for (let i = 0; i < 20; i++) {
      const { run, owner, attempt, claim_id } = await runningRun(h.nc);
      const [completion, cancelPath] = await Promise.all([
        request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' }),
        (async () => {
          const cancel = await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id });
          if (cancel.run.terminal) return cancel.run;
          // The runner stops the harness on the signal and reports the cancellation.
          return request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'cancelled' });
        })(),
      ]);
      const final = await getRun(h, run.id);
      expect(final.terminal).toBe(true);
      expect(['completed', 'cancelled']).toContain(final.status);
      expect(completion.status).toBe(final.status);
      expect(cancelPath.status).toBe(final.status);

      const statuses = await statusLog(h, run.id);
      const terminals = statuses.filter((s) => ['completed', 'cancelled', 'failed'].includes(s));
      expect(terminals).toEqual([final.status]);
      expect(statuses.at(-1)).toBe(final.status);
    }
  });

  it('never logs a move behind the terminal event of a decision that overtook it', async () => {
    // A user's cancel moves the run to `cancelling`; between its look for a terminal decision and
    // its append, the runner's completion is decided and logged. The terminal event stays last.
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const ctx = contextDecidingAt(1, () =>
      request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' }),
    );
    const doc = await h.store.runs.findOne({ _id: run.id });
    await moveRun(ctx, doc!, 'cancelling', { cause: 'cancel' });
    expect(ctx.decided()).toBe(true);
    expect(await statusLog(h, run.id)).toEqual(['queued', 'starting', 'running', 'completed']);
    expect(await getRun(h, run.id)).toMatchObject({
      status: 'completed',
      terminal: true,
    });
  });

  /** A context whose event log lets `decide` run just before its `nth` append. */
  function contextDecidingAt(nth: number, decide: () => Promise<unknown>): RunsContext & { decided: () => boolean } {
    const log = createEventLog({ nc: h.nc, js: jetstream(h.nc), jsm: h.jsm });
    let calls = 0;
    let decided = false;
    const step = async () => {
      if (++calls !== nth) return;
      await decide();
      decided = true;
    };
    return {
      store: h.store,
      interactions: h.interactions,
      nc: h.nc,
      js: jetstream(h.nc),
      config: loadConfig(RunsConfig, baseServiceEnv(h.nats.env('runs'))),
      logger: createLogger({ service: 'runs-test', level: 'silent' }),
      log: {
        ...log,
        async append(runId, entries, at) {
          await step();
          return log.append(runId, entries, at);
        },
        async appendAfter(runId, last, entry, at) {
          await step();
          return log.appendAfter(runId, last, entry, at);
        },
      },
      decided: () => decided,
    };
  }

  const runnerEvents = (n: number) =>
    Array.from({ length: n }, (_, i) => ({
      key: `late-${i}`,
      chunk: { type: 'message.delta', item_id: 'm', delta: `${i}` },
    }));

  it.each([1, 3])(
    "never stores a runner's event behind a terminal decision that overtook its append (decided before event %i)",
    async (nth) => {
      // The runner's batch passed the check for an ended run; then, before event `nth` went in,
      // the user's cancel ended the run. The terminal event stays last; the rest is refused.
      const { run, attempt, owner, claim_id } = await runningRun(h.nc);
      const ctx = contextDecidingAt(nth, () =>
        request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id }).then(() =>
          request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'cancelled' }),
        ),
      );
      const appended = appendEvents(ctx, { run_id: run.id, attempt, claim_id, events: runnerEvents(4) });
      await expect(appended).rejects.toMatchObject({ code: 'already_settled' });
      expect(ctx.decided()).toBe(true);
      const types = (await readLog(h, run.id)).map((e) => e.chunk as { type: string; status?: string });
      expect(types.at(-1)).toEqual(expect.objectContaining({ type: 'run.status', status: 'cancelled' }));
      // What went in before the decision stays, in order; nothing came after it.
      expect(types.filter((c) => c.type === 'message.delta')).toHaveLength(nth - 1);
    },
  );

  it('announces a question only while the run is live: never behind the terminal event', async () => {
    const { run, attempt, owner, claim_id } = await runningRun(h.nc);
    // The first append is the move to waiting_for_input; the decision comes before the second.
    const ctx = contextDecidingAt(2, () =>
      request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id }).then(() =>
        request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'cancelled' }),
      ),
    );
    const created = createInteraction(ctx, {
      run_id: run.id,
      attempt,
      claim_id,
      key: 'late-question',
      kind: 'question',
      questions: [{ id: 'q', header: 'Q', question: 'Now?', isOther: false, isSecret: false, options: [] }],
    });
    await expect(created).rejects.toMatchObject({ code: 'already_settled' });
    const chunks = (await readLog(h, run.id)).map((e) => e.chunk as { type: string; status?: string });
    expect(chunks.at(-1)).toEqual(expect.objectContaining({ type: 'run.status', status: 'cancelled' }));
    expect(chunks.map((c) => c.type)).not.toContain('interaction.requested');
  });

  it('ends a cancelling run exactly once when completion, cancellation and a redelivered job race', async () => {
    const outcomes = new Set<string>();
    for (let i = 0; i < 20; i++) {
      const { run, owner, attempt, claim_id } = await runningRun(h.nc);
      await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id });
      // The job comes back because the runner fell silent, and then it speaks up again.
      await silence(h, run.id);
      const [completed, cancelled, claim] = await Promise.allSettled([
        request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' }),
        request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'cancelled' }),
        request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-b', claim_id: newClaimId() }),
      ]);
      const final = await getRun(h, run.id);
      outcomes.add(final.status);
      expect(final.terminal).toBe(true);
      // Both runner reports get the run as it ended, whichever of them lost.
      expect(completed).toMatchObject({ status: 'fulfilled', value: { status: final.status } });
      expect(cancelled).toMatchObject({ status: 'fulfilled', value: { status: final.status } });
      expect(claim).toMatchObject({ status: 'rejected', reason: { code: 'already_settled' } });

      const statuses = await statusLog(h, run.id);
      expect(statuses.filter((s) => ['completed', 'cancelled', 'failed'].includes(s))).toEqual([final.status]);
      expect(statuses.at(-1)).toBe(final.status);
    }
    expect([...outcomes].every((s) => s === 'completed' || s === 'cancelled')).toBe(true);
  });
});
