import { DiscardPolicy } from '@nats-io/jetstream';
import { DOMAIN_STREAM, domainEvents, rpc, RunStatusEvent } from '@threadwork/contracts';
import { decodeJson, request } from '@threadwork/platform';
import { uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admission, failure, getRun, type Harness, readLog, runningRun, startHarness, statusLog } from './helpers.js';

// A crash can stop any flow between two of its writes. These tests write the state such a crash
// leaves behind directly into the service's collections and check that the next caller converges.

describe('recovery from interrupted writes', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ ORPHAN_SLOT_AFTER_MS: '60000' });
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('finishes an admission that died after taking the slot when it is retried', async () => {
    const req = admission();
    const runId = uniqueId('run_');
    await h.store.slots.insertOne({
      _id: `${req.thread_id}:1`,
      thread_id: req.thread_id,
      generation: 1,
      run_id: runId,
      admission_key: req.admission_key,
      created_at: new Date(),
    });
    const { run, created } = await request(h.nc, rpc.runs.admit, req);
    expect(created).toBe(true);
    expect(run).toMatchObject({ id: runId, status: 'queued' });
    expect(await statusLog(h, runId)).toEqual(['queued']);
    expect(await h.store.admissions.findOne({ _id: runId })).not.toBeNull();
  });

  it("frees a dead admission's slot once it is old, but not while it may still be in progress", async () => {
    const fresh = admission();
    await h.store.slots.insertOne({
      _id: `${fresh.thread_id}:1`,
      thread_id: fresh.thread_id,
      generation: 1,
      run_id: uniqueId('run_'),
      admission_key: uniqueId('adm_'),
      created_at: new Date(),
    });
    expect((await failure(request(h.nc, rpc.runs.admit, fresh))).code).toBe('thread_busy');

    const old = admission();
    await h.store.slots.insertOne({
      _id: `${old.thread_id}:1`,
      thread_id: old.thread_id,
      generation: 1,
      run_id: uniqueId('run_'),
      admission_key: uniqueId('adm_'),
      created_at: new Date(Date.now() - 5 * 60_000),
    });
    expect((await request(h.nc, rpc.runs.admit, old)).created).toBe(true);
  });

  it('takes the next slot after a run that ended, exactly once under concurrent admissions', async () => {
    const { run, owner, thread_id, attempt, claim_id } = await runningRun(h.nc);
    await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' });
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, () => request(h.nc, rpc.runs.admit, { ...admission({ owner_id: owner }), thread_id })),
    );
    const admitted = results.filter((r) => r.status === 'fulfilled');
    expect(admitted).toHaveLength(1);
    const slots = await h.store.slots.find({ thread_id }).sort({ generation: 1 }).toArray();
    expect(slots.map((s) => s.generation)).toEqual([1, 2]);
  });

  it('finishes a terminal decision whose follow-up writes were interrupted, once', async () => {
    const { run, owner, thread_id, attempt, claim_id } = await runningRun(h.nc);
    await h.store.terminals.insertOne({
      _id: run.id,
      status: 'cancelled',
      previous: 'running',
      error: null,
      usage: null,
      attempt,
      at: new Date(),
      event_sequence: null,
    });
    const answer = await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' });
    expect(answer).toMatchObject({ status: 'cancelled', terminal: true });
    const again = await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id });
    expect(again).toMatchObject({ requested: false, run: { status: 'cancelled' } });
    expect(await statusLog(h, run.id)).toEqual(['queued', 'starting', 'running', 'cancelled']);
    expect((await request(h.nc, rpc.runs.live, { owner_id: owner, thread_id })).run).toBeNull();
  });

  it('reports no live run once the run ended, even if a racing move rewrote its document as live', async () => {
    const { run, owner, thread_id, attempt, claim_id } = await runningRun(h.nc);
    await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' });
    // What a cancel's move to `cancelling` leaves on FerretDB when its read preceded the terminal
    // write and its write followed it: the whole document as the move saw it, live.
    await h.store.runs.updateOne(
      { _id: run.id },
      { $set: { status: 'cancelling', previous_status: 'running', terminal: false, completed_at: null } },
    );
    expect((await request(h.nc, rpc.runs.live, { owner_id: owner, thread_id })).run).toBeNull();
    // …and the run document is finished again on the way.
    expect(await getRun(h, run.id)).toMatchObject({
      status: 'completed',
      terminal: true,
    });
    expect(await statusLog(h, run.id)).toEqual(['queued', 'starting', 'running', 'completed']);
  });

  it('shows a settlement whose follow-ups were interrupted, and finishes it when the runner reads it', async () => {
    const { run, attempt, owner, claim_id } = await runningRun(h.nc);
    const interaction = await request(h.nc, rpc.runs.interactionCreate, {
      run_id: run.id,
      attempt,
      claim_id,
      key: 'ask',
      kind: 'question',
      questions: [{ id: 'q', header: 'Q', question: 'Go?', isOther: false, isSecret: false, options: [] }],
    });
    await h.interactions.settlements.insertOne({
      _id: interaction.id,
      status: 'answered',
      answers: { q: { kind: 'text', text: 'go' } },
      cancelled_by: null,
      resolved_at: new Date(),
    });
    const shown = await request(h.nc, rpc.runs.interactionGet, { owner_id: owner, interaction_id: interaction.id });
    expect(shown).toMatchObject({ status: 'answered', answers: { q: { kind: 'text', text: 'go' } } });
    expect(
      (
        await failure(
          request(h.nc, rpc.runs.interactionAnswer, {
            owner_id: owner,
            interaction_id: interaction.id,
            request: { action: 'cancel' },
          }),
        )
      ).code,
    ).toBe('already_settled');
    expect((await getRun(h, run.id)).status).toBe('waiting_for_input');

    const settlement = await request(h.nc, rpc.runs.interactionSettlement, {
      run_id: run.id,
      claim_id,
      interaction_id: interaction.id,
    });
    expect(settlement.answers).toEqual({ q: { kind: 'text', text: 'go' } });
    expect((await getRun(h, run.id)).status).toBe('running');
    const settled = (await readLog(h, run.id)).filter(
      (e) => (e.chunk as { type: string }).type === 'interaction.settled',
    );
    expect(settled).toHaveLength(1);
  });

  /** The last run status event on DOMAIN. */
  const lastRunStatus = async () => {
    const msg = await h.jsm.streams.getMessage(DOMAIN_STREAM.name, { last_by_subj: domainEvents.runStatus.subject });
    return RunStatusEvent.parse(decodeJson(msg!.data));
  };

  /** Runs `work` while DOMAIN takes no more messages (max_msgs reached, discard new). */
  async function whileDomainRefuses<T>(work: () => Promise<T>): Promise<T> {
    const { config, state } = await h.jsm.streams.info(DOMAIN_STREAM.name);
    await h.jsm.streams.update(DOMAIN_STREAM.name, { ...config, max_msgs: state.messages, discard: DiscardPolicy.New });
    try {
      return await work();
    } finally {
      await h.jsm.streams.update(DOMAIN_STREAM.name, config);
    }
  }

  it('publishes a terminal DOMAIN event the stream refused once the runner retries its move', async () => {
    const { run, attempt, claim_id } = await runningRun(h.nc);
    const complete = () => request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' });

    // The run's terminal event is refused after the run says terminal.
    const refused = await whileDomainRefuses(() => failure(complete()));
    expect(refused.code).toBe('unavailable');
    expect(refused.retryable).toBe(true);
    expect((await getRun(h, run.id)).status).toBe('completed');
    expect(await lastRunStatus()).toMatchObject({ run_id: run.id, status: 'running' });

    expect((await complete()).status).toBe('completed');
    expect(await lastRunStatus()).toMatchObject({ run_id: run.id, status: 'completed', terminal: true });
    expect(await h.store.terminals.findOne({ _id: run.id })).toMatchObject({ announced: true });
  });

  it('publishes the terminal DOMAIN event of a cancel the stream refused once the user retries it', async () => {
    const req = admission();
    const { run } = await request(h.nc, rpc.runs.admit, req);
    const cancel = () => request(h.nc, rpc.runs.cancel, { owner_id: req.owner_id, run_id: run.id });

    const refused = await whileDomainRefuses(() => failure(cancel()));
    expect(refused.code).toBe('unavailable');
    expect((await getRun(h, run.id)).status).toBe('cancelled');
    expect(await lastRunStatus()).toMatchObject({ run_id: run.id, status: 'queued' });

    expect(await cancel()).toMatchObject({ run: { status: 'cancelled' }, requested: false });
    expect(await lastRunStatus()).toMatchObject({ run_id: run.id, status: 'cancelled', terminal: true });
  });
});
