import { rpc } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { newClaimId } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { failure, getRun, readLog, runningRun, statusLog } from './helpers.js';
import { admitRun, lifecycleHarness } from './lifecycle-harness.js';

describe('run lifecycle', () => {
  const h = lifecycleHarness();
  const admit = () => admitRun(h);

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
});
