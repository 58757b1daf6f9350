import { setTimeout as delay } from 'node:timers/promises';
import { rpc } from '@threadwork/contracts';
import { AppError, request } from '@threadwork/platform';
import { newClaimId } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { createAttemptStore } from '../src/store/attempts.js';
import { failure, getRun, readLog, runningRun, silence, statusLog, type Harness } from './helpers.js';
import { admitRun, lifecycleHarness } from './lifecycle-harness.js';

describe('run lifecycle', () => {
  const h = lifecycleHarness();
  const admit = () => admitRun(h);

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

  it('never moves back when a holder was last heard from, whichever replica writes last', async () => {
    const { run } = await runningRun(h.nc);
    // Two replicas hear the holder; the earlier time's write lands last (a slow replica).
    const [first, late] = [createAttemptStore(h.db), createAttemptStore(h.db)];
    const heardAt = new Date(Date.now() + 60_000);
    await first.hear(run.id, 0, heardAt, 0);
    await late.hear(run.id, 0, new Date(), 0);
    expect((await h.store.attempts.findOne({ _id: `${run.id}:0` }))?.heard_at).toEqual(heardAt);
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
});

describe('a runner whose lease ran out', () => {
  // The shortest lease there is (JOB_ACK_WAIT_MS, 1 s), waited out for real rather than written
  // into the database: a replica whose last append of the holder read the run less than half a
  // lease ago takes it to hold the run still (runner-holder.ts, stillHolding).
  const h = lifecycleHarness({ JOB_ACK_WAIT_MS: '1000' });

  it('fences a runner whose attempt was taken over out of moves and appends', async () => {
    const { run, claim_id } = await runningRun(h.nc);
    // The holder appends while it holds the run, as a runner streams its turn.
    const early = await request(h.nc, rpc.runs.append, {
      run_id: run.id,
      attempt: 0,
      claim_id,
      events: [{ key: 'e0', chunk: { type: 'message.delta', item_id: 'i', delta: 'early' } }],
    });
    expect(early.sequences).toHaveLength(1);
    // Then it falls silent, and its lease runs out for real: the replica it appended through last
    // does not take it to hold the run any longer.
    const takeoverClaim = newClaimId();
    const takeover = await claimOnceLeaseRanOut(h, run.id, takeoverClaim);
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
});

describe('a run taken over where its lost attempt left it', () => {
  const h = lifecycleHarness();

  it('is moved to that status again by the new attempt, announced once under its own key', async () => {
    const { run } = await runningRun(h.nc);
    const takeoverClaim = newClaimId();
    expect((await claimOnceLeaseRanOut(h, run.id, takeoverClaim)).attempt).toBe(1);

    // The new holder, its sandbox ready, says the run is running, and again as a retry would.
    const move = { run_id: run.id, attempt: 1, claim_id: takeoverClaim, to: 'running' } as const;
    expect(await request(h.nc, rpc.runs.transition, move)).toMatchObject({ status: 'running', attempt: 1 });
    expect(await request(h.nc, rpc.runs.transition, move)).toMatchObject({ status: 'running', attempt: 1 });

    // The lost attempt's `running` is not announced again: once the stream's dedupe window is
    // over, that would store it twice.
    const statuses = (await readLog(h, run.id))
      .map((e) => e.chunk as { type: string; status?: string; attempt?: number })
      .filter((c) => c.type === 'run.status')
      .map((c) => `${c.status}@${c.attempt}`);
    expect(statuses).toEqual(['queued@0', 'starting@0', 'running@0', 'running@1']);
  });
});

/** Claims a run as another runner, coming back as told while its holder's lease lasts. */
async function claimOnceLeaseRanOut(h: Harness, runId: string, claimId: string) {
  for (;;) {
    const outcome = await request(h.nc, rpc.runs.claim, {
      run_id: runId,
      runner_id: 'runner-b',
      claim_id: claimId,
    }).then(
      (claimed) => ({ claimed }),
      (err: unknown) => ({ err }),
    );
    if ('claimed' in outcome) return outcome.claimed;
    const { err } = outcome;
    if (!(err instanceof AppError) || err.code !== 'unavailable') throw err;
    await delay(Number(err.details?.retry_after_ms ?? 100));
  }
}
