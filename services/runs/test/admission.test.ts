import { domainEvents, RunStatusEvent, rpc, STREAM_NAMES, subjects } from '@threadwork/contracts';
import { decodeJson, request } from '@threadwork/platform';
import { newClaimId, uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admission, failure, readLog, runningRun, startHarness, statusLog, type Harness } from './helpers.js';

describe('runs admission', () => {
  let h: Harness;
  /** A harness of this file's own, so that its jobs have a RUN_JOBS subject nothing else uses. */
  const ownHarness = uniqueId('h');
  beforeAll(async () => {
    h = await startHarness({ HARNESSES: `codex,${ownHarness}` });
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('admits a queued run with server defaults, its job on RUN_JOBS and a queued event in its log', async () => {
    const harness = ownHarness;
    const req = admission({ harness });
    const { run, created } = await request(h.nc, rpc.runs.admit, req);
    expect(created).toBe(true);
    expect(run).toMatchObject({
      status: 'queued',
      attempt: 0,
      thread_id: req.thread_id,
      project_id: req.project_id,
      message_id: req.message_id,
      harness,
      model: 'gpt-5-codex',
      reasoning_effort: 'medium',
      collaboration_mode: 'default',
      sandbox_id: null,
      error: null,
      usage: null,
      started_at: null,
      completed_at: null,
      terminal: false,
    });
    expect(run.id).toMatch(/^run_[0-9a-f]{32}$/);

    const stored = await h.jsm.streams.getMessage(STREAM_NAMES.runJobs, { last_by_subj: subjects.runJobs(harness) });
    expect(stored?.header.get('Nats-Msg-Id')).toBe(run.id);
    // The stream holds the run's ids only: a pull reaches an inbox every runner's key may read, so
    // the job (prompt, owner, repositories) comes only in the claim's sealed reply.
    expect(decodeJson(stored!.data)).toEqual({ run_id: run.id, thread_id: req.thread_id });

    const log = await readLog(h, run.id);
    expect(log).toHaveLength(1);
    expect(log[0]?.chunk).toMatchObject({ type: 'run.status', status: 'queued' });

    const domain = await h.jsm.streams.getMessage(STREAM_NAMES.domain, {
      last_by_subj: domainEvents.runStatus.subject,
    });
    expect(RunStatusEvent.parse(decodeJson(domain!.data))).toMatchObject({
      run_id: run.id,
      status: 'queued',
      previous: null,
      terminal: false,
      owner_id: req.owner_id,
    });

    const claimed = await request(h.nc, rpc.runs.claim, {
      run_id: run.id,
      runner_id: 'runner-1',
      claim_id: newClaimId(),
    });
    expect(claimed.job).toEqual({
      run_id: run.id,
      thread_id: req.thread_id,
      project_id: req.project_id,
      owner_id: req.owner_id,
      message_id: req.message_id,
      prompt: req.prompt,
      harness,
      model: 'gpt-5-codex',
      reasoning_effort: 'medium',
      collaboration_mode: 'default',
      repositories: req.repositories,
    });
  });

  it('keeps what the admission asked for and the pre-chosen run id', async () => {
    const runId = uniqueId('run_');
    const { run } = await request(
      h.nc,
      rpc.runs.admit,
      admission({ run_id: runId, model: 'o3', reasoning_effort: 'high', collaboration_mode: 'plan' }),
    );
    expect(run).toMatchObject({ id: runId, model: 'o3', reasoning_effort: 'high', collaboration_mode: 'plan' });
  });

  it('returns the same run for the same admission key, even after the run ended', async () => {
    const req = admission();
    const first = await request(h.nc, rpc.runs.admit, req);
    const again = await request(h.nc, rpc.runs.admit, { ...req, run_id: uniqueId('run_') });
    expect(again).toEqual({ run: first.run, created: false });

    await request(h.nc, rpc.runs.cancel, { owner_id: req.owner_id, run_id: first.run.id });
    const afterEnd = await request(h.nc, rpc.runs.admit, req);
    expect(afterEnd.created).toBe(false);
    expect(afterEnd.run).toMatchObject({ id: first.run.id, status: 'cancelled', terminal: true });
    expect(await statusLog(h, first.run.id)).toEqual(['queued', 'cancelled']);
  });

  it('refuses a second live run on a thread with thread_busy naming the live run', async () => {
    const req = admission();
    const { run } = await request(h.nc, rpc.runs.admit, req);
    const err = await failure(
      request(h.nc, rpc.runs.admit, { ...admission({ owner_id: req.owner_id }), thread_id: req.thread_id }),
    );
    expect(err.code).toBe('thread_busy');
    expect(err.details).toEqual({ active_run_id: run.id });
    expect((await request(h.nc, rpc.runs.live, { owner_id: req.owner_id, thread_id: req.thread_id })).run?.id).toBe(
      run.id,
    );
  });

  it('lets exactly one of 20 concurrent admissions on one thread through', async () => {
    const base = admission();
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, () =>
        request(h.nc, rpc.runs.admit, { ...base, admission_key: uniqueId('adm_'), message_id: uniqueId('msg_') }),
      ),
    );
    const admitted = outcomes.filter((o) => o.status === 'fulfilled');
    expect(admitted).toHaveLength(1);
    const winner = admitted[0]!.value.run;
    for (const o of outcomes) {
      if (o.status === 'rejected') {
        expect(o.reason).toMatchObject({ code: 'thread_busy', details: { active_run_id: winner.id } });
      }
    }
    const live = await request(h.nc, rpc.runs.live, { owner_id: base.owner_id, thread_id: base.thread_id });
    expect(live.run?.id).toBe(winner.id);
  });

  it('converges 10 concurrent retries of one admission on one run', async () => {
    const req = admission();
    const results = await Promise.all(Array.from({ length: 10 }, () => request(h.nc, rpc.runs.admit, req)));
    expect(new Set(results.map((r) => r.run.id)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(await statusLog(h, results[0]!.run.id)).toEqual(['queued']);
  });

  it('cancels a queued run at once and frees its thread for the next run', async () => {
    const req = admission();
    const { run } = await request(h.nc, rpc.runs.admit, req);
    const cancelled = await request(h.nc, rpc.runs.cancel, { owner_id: req.owner_id, run_id: run.id });
    expect(cancelled.requested).toBe(true);
    expect(cancelled.run).toMatchObject({ status: 'cancelled', terminal: true });
    expect(cancelled.run.completed_at).not.toBeNull();

    expect((await request(h.nc, rpc.runs.live, { owner_id: req.owner_id, thread_id: req.thread_id })).run).toBeNull();
    const next = await request(h.nc, rpc.runs.admit, {
      ...admission({ owner_id: req.owner_id }),
      thread_id: req.thread_id,
    });
    expect(next.created).toBe(true);
    expect(next.run.status).toBe('queued');

    const again = await request(h.nc, rpc.runs.cancel, { owner_id: req.owner_id, run_id: run.id });
    expect(again).toEqual({ run: cancelled.run, requested: false });
  });

  it('refuses a harness the deployment does not serve, and writes nothing', async () => {
    const req = admission({ harness: 'claude-code' });
    const err = await failure(request(h.nc, rpc.runs.admit, req));
    expect(err.code).toBe('invalid_request');
    expect(err.message).toBe(`harness: not a harness this deployment serves (codex, ${ownHarness})`);
    // The thread is not held: the same thread takes a run of a harness that is served.
    const served = await request(h.nc, rpc.runs.admit, {
      ...req,
      admission_key: `${req.admission_key}-2`,
      harness: 'codex',
    });
    expect(served.created).toBe(true);
  });

  it('rejects a harness or run id that cannot be a subject token', async () => {
    expect((await failure(request(h.nc, rpc.runs.admit, admission({ harness: 'co.dex' })))).code).toBe(
      'invalid_request',
    );
    expect((await failure(request(h.nc, rpc.runs.admit, admission({ run_id: 'run_>' })))).code).toBe('invalid_request');
  });

  it('reads runs for their owner only', async () => {
    const req = admission();
    const { run } = await request(h.nc, rpc.runs.admit, req);
    expect(await request(h.nc, rpc.runs.get, { owner_id: req.owner_id, run_id: run.id })).toEqual(run);
    expect((await failure(request(h.nc, rpc.runs.get, { owner_id: 'usr_other', run_id: run.id }))).code).toBe(
      'not_found',
    );
    expect((await failure(request(h.nc, rpc.runs.get, { owner_id: req.owner_id, run_id: 'run_missing' }))).code).toBe(
      'not_found',
    );
    // No read of a user's data is made for no one: without an owner, every one is refused.
    const ownerless = { run_id: run.id, interaction_id: 'int_any', from: 1, limit: 10 } as never;
    for (const endpoint of [rpc.runs.get, rpc.runs.eventsPage, rpc.runs.interactionGet]) {
      expect((await failure(request(h.nc, endpoint, ownerless))).code, endpoint.subject).toBe('invalid_request');
    }
    expect((await failure(request(h.nc, rpc.runs.cancel, { owner_id: 'usr_other', run_id: run.id }))).code).toBe(
      'not_found',
    );
    expect(
      (await failure(request(h.nc, rpc.runs.eventsPage, { owner_id: 'usr_other', run_id: run.id, from: 1, limit: 10 })))
        .code,
    ).toBe('not_found');
    expect((await request(h.nc, rpc.runs.live, { owner_id: 'usr_other', thread_id: req.thread_id })).run).toBeNull();

    const other = await request(h.nc, rpc.runs.admit, admission({ owner_id: req.owner_id }));
    const foreign = await request(h.nc, rpc.runs.admit, admission());
    const many = await request(h.nc, rpc.runs.getMany, {
      owner_id: req.owner_id,
      run_ids: [other.run.id, foreign.run.id, 'run_missing', run.id],
    });
    expect(many.runs).toEqual([
      { id: other.run.id, status: 'queued' },
      { id: run.id, status: 'queued' },
    ]);
  });

  it("counts an owner's live runs (queued … cancelling) up to at_most; an ended one frees its place at once", async () => {
    const owner = uniqueId('usr_');
    const count = async (atMost = 10) =>
      (await request(h.nc, rpc.runs.liveCount, { owner_id: owner, at_most: atMost })).live;
    expect(await count()).toBe(0);
    const queued = await request(h.nc, rpc.runs.admit, admission({ owner_id: owner }));
    const running = await runningRun(h.nc, { owner_id: owner });
    const cancelling = await runningRun(h.nc, { owner_id: owner });
    await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: cancelling.run.id });
    // Someone else's runs are not counted.
    await request(h.nc, rpc.runs.admit, admission());
    expect(await count()).toBe(3);
    expect(await count(2)).toBe(2);

    await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: queued.run.id });
    expect(await count()).toBe(2);
    // Decided but not yet written on the run document (its follow-up writes under way): not live.
    await h.store.terminals.insertOne({
      _id: running.run.id,
      status: 'completed',
      previous: 'running',
      error: null,
      usage: null,
      attempt: running.attempt,
      at: new Date(),
      event_sequence: null,
    });
    expect(await count()).toBe(1);
  });
});
