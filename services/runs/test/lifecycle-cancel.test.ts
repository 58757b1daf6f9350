import { rpc, RunSignal, subjects } from '@threadwork/contracts';
import { decodeJson, request } from '@threadwork/platform';
import { newClaimId } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { failure, getRun, runningRun, silence, statusLog } from './helpers.js';
import { lifecycleHarness } from './lifecycle-harness.js';

describe('run lifecycle', () => {
  const h = lifecycleHarness();

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
