import { jetstream } from '@nats-io/jetstream';
import { rpc, runEventLayout } from '@threadwork/contracts';
import { createLogger, loadConfig, request } from '@threadwork/platform';
import { baseServiceEnv, newClaimId } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { RunsConfig } from '../src/index.js';
import type { RunsContext } from '../src/flows/context.js';
import { createInteraction } from '../src/flows/interactions.js';
import { moveRun } from '../src/flows/lifecycle.js';
import { appendEvents } from '../src/flows/runner-moves.js';
import { createEventLog } from '../src/store/event-log.js';
import { getRun, readLog, runningRun, silence, statusLog } from './helpers.js';
import { lifecycleHarness } from './lifecycle-harness.js';

describe('run lifecycle', () => {
  const h = lifecycleHarness();

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
    const log = createEventLog({ nc: h.nc, js: jetstream(h.nc), jsm: h.jsm, layout: runEventLayout(1) });
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
      archive: h.archive,
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
        async appendBatchAfter(runId, last, entries, at) {
          await step();
          return log.appendBatchAfter(runId, last, entries, at);
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

  it("never stores a runner's batch behind a terminal decision that overtook its append", async () => {
    // The runner's batch passed the check for an ended run; then, before the batch went in, the
    // user's cancel ended the run. The batch is conditional on the log's end as checked: none of
    // it is stored, and the terminal event stays last.
    const { run, attempt, owner, claim_id } = await runningRun(h.nc);
    const ctx = contextDecidingAt(1, () => cancel(run.id, owner, attempt, claim_id));
    const appended = appendEvents(ctx, { run_id: run.id, attempt, claim_id, events: runnerEvents(4) });
    await expect(appended).rejects.toMatchObject({ code: 'already_settled' });
    expect(ctx.decided()).toBe(true);
    const types = (await readLog(h, run.id)).map((e) => e.chunk as { type: string; status?: string });
    expect(types.at(-1)).toEqual(expect.objectContaining({ type: 'run.status', status: 'cancelled' }));
    expect(types.filter((c) => c.type === 'message.delta')).toHaveLength(0);
  });

  /**
   * A holder streaming its turn through `ctx`'s replica: its first batch went in (the run read),
   * so the log ends with its own event. Counts the replica's reads of the run from then on.
   */
  async function streaming(
    ctx: RunsContext & { decided: () => boolean },
    fence: { run_id: string; attempt: number; claim_id: string },
  ) {
    await appendEvents(ctx, {
      ...fence,
      events: [{ key: 'first', chunk: { type: 'message.delta', item_id: 'm', delta: 'first' } }],
    });
    const counted = { runReads: 0 };
    const store = ctx.store;
    ctx.store = {
      ...store,
      run: (id) => {
        counted.runReads++;
        return store.run(id);
      },
    };
    return counted;
  }

  const deltasOf = async (runId: string) =>
    (await readLog(h, runId))
      .map((e) => e.chunk as { type: string; delta?: string })
      .filter((c) => c.type === 'message.delta')
      .map((c) => c.delta);

  it('stores the next batch of a holder streaming its turn behind its own last event, without reading the run', async () => {
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const fence = { run_id: run.id, attempt, claim_id };
    const ctx = contextDecidingAt(0, async () => {});
    const counted = await streaming(ctx, fence);
    const sequences = await appendEvents(ctx, { ...fence, events: runnerEvents(3) });
    expect(counted.runReads).toBe(0);
    const log = await readLog(h, run.id);
    expect(log.slice(-3).map((e) => e.sequence)).toEqual(sequences);
    expect(await deltasOf(run.id)).toEqual(['first', '0', '1', '2']);
  });

  it('never stores the batch of a holder streaming its turn behind a terminal event that came after its look at the log', async () => {
    // Its replica takes the holder to hold the run without reading it, and reads only the log's
    // last event: its own. Between that read and the batch, the user's cancel ended the run: the
    // batch was conditional on the end it read, and none of it is stored.
    const { run, attempt, owner, claim_id } = await runningRun(h.nc);
    const fence = { run_id: run.id, attempt, claim_id };
    let runReadsBeforeBatch = -1;
    // Calls: 1 the first batch, 2 the next one: decided before it.
    const ctx = contextDecidingAt(2, async () => {
      runReadsBeforeBatch = counted.runReads;
      await cancel(run.id, owner, attempt, claim_id);
    });
    const counted = await streaming(ctx, fence);
    const appended = appendEvents(ctx, { ...fence, events: runnerEvents(4) });
    await expect(appended).rejects.toMatchObject({ code: 'already_settled' });
    expect(ctx.decided()).toBe(true);
    expect(runReadsBeforeBatch).toBe(0);
    const chunks = (await readLog(h, run.id)).map((e) => e.chunk as { type: string; status?: string });
    expect(chunks.at(-1)).toEqual(expect.objectContaining({ type: 'run.status', status: 'cancelled' }));
    expect(await deltasOf(run.id)).toEqual(['first']);
  });

  it('reads the run again for a holder streaming its turn once the log ends with an event it did not write', async () => {
    // The run ended: its log ends with the terminal event, which the runs service wrote.
    const { run, attempt, owner, claim_id } = await runningRun(h.nc);
    const fence = { run_id: run.id, attempt, claim_id };
    const ctx = contextDecidingAt(0, async () => {});
    const counted = await streaming(ctx, fence);
    await cancel(run.id, owner, attempt, claim_id);
    await expect(appendEvents(ctx, { ...fence, events: runnerEvents(2) })).rejects.toMatchObject({
      code: 'already_settled',
    });
    expect(counted.runReads).toBeGreaterThan(0);
    const chunks = (await readLog(h, run.id)).map((e) => e.chunk as { type: string; status?: string });
    expect(chunks.at(-1)).toEqual(expect.objectContaining({ type: 'run.status', status: 'cancelled' }));
  });

  it("never stores a streaming holder's batch behind the events of an attempt that took the run over, within its replica's half lease", async () => {
    // Its replica read the run held by attempt 0 a moment ago. Then the holder fell silent, as far
    // as the database tells, and another runner took the run over and wrote to the log: the old
    // holder's next batch meets the new attempt's event at the end, and is refused.
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const fence = { run_id: run.id, attempt, claim_id };
    const ctx = contextDecidingAt(0, async () => {});
    const counted = await streaming(ctx, fence);
    await silence(h, run.id);
    await takeOverAndWrite(run.id);
    await expect(appendEvents(ctx, { ...fence, events: runnerEvents(2) })).rejects.toMatchObject({
      code: 'already_settled',
    });
    expect(counted.runReads).toBeGreaterThan(0);
    expect(await deltasOf(run.id)).toEqual(['first', 'new']);
  });

  it("never stores a streaming holder's batch behind the events of the attempt that took over the run it handed back through another replica", async () => {
    // The hand-back goes through the service's replica, which this context does not hear of; the
    // next claim takes the run at once.
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const fence = { run_id: run.id, attempt, claim_id };
    const ctx = contextDecidingAt(0, async () => {});
    await streaming(ctx, fence);
    expect(await request(h.nc, rpc.runs.release, fence)).toEqual({ released: true });
    await takeOverAndWrite(run.id);
    await expect(appendEvents(ctx, { ...fence, events: runnerEvents(2) })).rejects.toMatchObject({
      code: 'already_settled',
    });
    expect(await deltasOf(run.id)).toEqual(['first', 'new']);
  });

  /** Another runner claims the run (its holder silent or gone) and writes its first event. */
  async function takeOverAndWrite(runId: string) {
    const claimId = newClaimId();
    const taken = await request(h.nc, rpc.runs.claim, { run_id: runId, runner_id: 'runner-b', claim_id: claimId });
    await request(h.nc, rpc.runs.append, {
      run_id: runId,
      attempt: taken.attempt,
      claim_id: claimId,
      events: [{ key: 'new-0', chunk: { type: 'message.delta', item_id: 'n', delta: 'new' } }],
    });
  }

  it('reads the run for a holder its replica has not seen append, and fences it', async () => {
    // Nothing went through this context yet: the claim of attempt 0 is known only to the service's replica.
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const ctx = contextDecidingAt(0, async () => {});
    const store = ctx.store;
    let runReads = 0;
    ctx.store = { ...store, run: (id) => (runReads++, store.run(id)) };
    await appendEvents(ctx, { run_id: run.id, attempt, claim_id, events: runnerEvents(2) });
    expect(runReads).toBeGreaterThan(0);
    const refused = appendEvents(ctx, { run_id: run.id, attempt, claim_id: newClaimId(), events: runnerEvents(1) });
    await expect(refused).rejects.toMatchObject({ code: 'already_settled' });
  });

  it('appends one by one a batch holding an event stored before, and stops at a terminal decision met on the way', async () => {
    // The runner sends its first event again with three new ones (its earlier append's answer was
    // lost). The batch is refused whole (the repeat); one by one, the repeat answers with its
    // sequence, the next goes in, and the run is cancelled before the third: the rest is refused.
    const { run, attempt, owner, claim_id } = await runningRun(h.nc);
    const fence = { run_id: run.id, attempt, claim_id };
    const [first] = (await request(h.nc, rpc.runs.append, { ...fence, events: runnerEvents(1) })).sequences;
    // Calls: 1 the batch, 2 the repeat, 3 the second event, 4 the third: decided before it.
    const ctx = contextDecidingAt(4, () => cancel(run.id, owner, attempt, claim_id));
    const appended = appendEvents(ctx, { run_id: run.id, attempt, claim_id, events: runnerEvents(4) });
    await expect(appended).rejects.toMatchObject({ code: 'already_settled' });
    expect(ctx.decided()).toBe(true);
    const log = await readLog(h, run.id);
    const deltas = log.filter((e) => (e.chunk as { type: string }).type === 'message.delta');
    expect(deltas.map((e) => (e.chunk as { delta: string }).delta)).toEqual(['0', '1']);
    expect(deltas[0]!.sequence).toBe(first);
    expect(log.at(-1)!.chunk).toEqual(expect.objectContaining({ type: 'run.status', status: 'cancelled' }));
  });

  it("never stores a stale attempt's batch behind the events of the attempt that took the run over", async () => {
    // The runner's batch passed its fence; then, before the batch went in, its run was taken over
    // by a newer attempt (the holder had fallen silent), whose first event is in the log. The old
    // attempt's batch is refused whole: none of it lands behind the new holder's event.
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const ctx = contextDecidingAt(1, async () => {
      await silence(h, run.id);
      const claimId = newClaimId();
      const taken = await request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-b', claim_id: claimId });
      // The new holder's first event is in the log before the old holder's batch.
      await request(h.nc, rpc.runs.append, {
        run_id: run.id,
        attempt: taken.attempt,
        claim_id: claimId,
        events: [{ key: 'new-0', chunk: { type: 'message.delta', item_id: 'n', delta: 'new' } }],
      });
    });
    const appended = appendEvents(ctx, { run_id: run.id, attempt, claim_id, events: runnerEvents(4) });
    await expect(appended).rejects.toMatchObject({ code: 'already_settled' });
    expect(ctx.decided()).toBe(true);
    const deltas = (await readLog(h, run.id))
      .map((e) => e.chunk as { type: string; delta?: string })
      .filter((c) => c.type === 'message.delta');
    expect(deltas.map((c) => c.delta)).toEqual(['new']);
  });

  it('stores a batch at consecutive sequences, all behind the log’s end as checked', async () => {
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const { sequences } = await request(h.nc, rpc.runs.append, {
      run_id: run.id,
      attempt,
      claim_id,
      events: runnerEvents(50),
    });
    expect(sequences).toEqual(sequences.map((_, i) => sequences[0]! + i));
    const log = await readLog(h, run.id);
    expect(log.slice(-50).map((e) => e.sequence)).toEqual(sequences);
  });

  const cancel = (runId: string, owner: string, attempt: number, claimId: string) =>
    request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: runId }).then(() =>
      request(h.nc, rpc.runs.transition, { run_id: runId, attempt, claim_id: claimId, to: 'cancelled' }),
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
    // The run's end settled the question it had raised: asked once, cancelled, before the end.
    expect(chunks.slice(-3)).toEqual([
      expect.objectContaining({ type: 'interaction.requested' }),
      expect.objectContaining({ type: 'interaction.settled', status: 'cancelled' }),
      expect.objectContaining({ type: 'run.status', status: 'cancelled' }),
    ]);
    expect(chunks.filter((c) => c.type === 'interaction.requested')).toHaveLength(1);
  });
});
