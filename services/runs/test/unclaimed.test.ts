import { rpc } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { newClaimId, uniqueId, waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admission, failure, getRun, type Harness, startHarness, statusLog } from './helpers.js';

// A run no runner claims — its harness served by none, or every runner busy — must not keep its
// thread busy for good: past RUN_QUEUE_MAX_AGE_MS it fails `no_runner`.

const MAX_AGE_MS = 5_000;

describe('a run no runner claims', () => {
  let h: Harness;
  /** Served on paper, by no runner here: its jobs wait on a RUN_JOBS subject nothing consumes. */
  const harness = uniqueId('h');
  beforeAll(async () => {
    h = await startHarness({ HARNESSES: `codex,${harness}`, RUN_QUEUE_MAX_AGE_MS: String(MAX_AGE_MS) });
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('fails no_runner once it has waited RUN_QUEUE_MAX_AGE_MS, freeing its thread; a claimed one is kept', async () => {
    const unclaimedReq = admission({ harness });
    const { run: unclaimed } = await request(h.nc, rpc.runs.admit, unclaimedReq);
    const claimedReq = admission({ harness });
    const { run: claimed } = await request(h.nc, rpc.runs.admit, claimedReq);
    await request(h.nc, rpc.runs.claim, { run_id: claimed.id, runner_id: 'runner-a', claim_id: newClaimId() });

    const failed = await waitFor(
      'the unclaimed run to end',
      async () => {
        const run = await getRun(h, unclaimed.id);
        return run.terminal && run;
      },
      10 * MAX_AGE_MS + 60_000,
      { intervalMs: 200 },
    );
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'no_runner' } });
    expect(failed.error?.message).toContain(`harness "${harness}"`);
    expect(await statusLog(h, unclaimed.id)).toEqual(['queued', 'failed']);
    // The sweep that failed it saw the claimed run too, past the same age: it is left to its runner.
    const kept = await getRun(h, claimed.id);
    expect(kept).toMatchObject({ status: 'starting', terminal: false });

    // The thread takes its next run; a runner coming late for the failed one finds it over.
    const next = await request(h.nc, rpc.runs.admit, { ...admission({ harness }), thread_id: unclaimedReq.thread_id });
    expect(next.created).toBe(true);
    const late = await failure(
      request(h.nc, rpc.runs.claim, { run_id: unclaimed.id, runner_id: 'runner-late', claim_id: newClaimId() }),
    );
    expect(late.code).toBe('already_settled');
  });
});
