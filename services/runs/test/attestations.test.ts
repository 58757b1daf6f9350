import { rpc } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { newClaimId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failure, runningRun, startHarness, type Harness } from './helpers.js';

// A runner's DOMAIN events count only when the holder of their run attested them: the services
// acting on them ask here first.

const SUBJECT = 'evt.runner.candidate.produced';
const digest = (c: string) => c.repeat(64);

describe('attested runner events', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('takes an event from the holder of the live run only, and confirms it only as what the run is', async () => {
    const held = await runningRun(h.nc);
    const { run, attempt, claim_id, owner, thread_id } = held;
    const attest = (claim: string, d = digest('a'), subject = SUBJECT) =>
      request(h.nc, rpc.runs.attest, { run_id: run.id, attempt, claim_id: claim, subject, digest: d });
    expect(await attest(claim_id)).toEqual({ attested: true });
    expect(await attest(claim_id)).toEqual({ attested: true });
    expect((await failure(attest(newClaimId(), digest('b')))).code).toBe('already_settled');
    // Only runner subjects.
    expect((await failure(attest(claim_id, digest('c'), 'evt.runs.run.status'))).code).toBe('invalid_request');

    const repo = (await h.store.runs.findOne({ _id: run.id }))!.repositories[0]!;
    const facts = {
      run_id: run.id,
      subject: SUBJECT,
      digest: digest('a'),
      thread_id,
      owner_id: owner,
      repository: { project_repository_id: repo.project_repository_id, repository_id: repo.repository_id },
    };
    const check = (over: Partial<typeof facts>) => request(h.nc, rpc.runs.attestation, { ...facts, ...over });
    expect(await check({})).toEqual({ confirmed: true, reason: null });
    for (const wrong of [
      { digest: digest('b') },
      { subject: 'evt.runner.message.completed' },
      { thread_id: 'thr_other' },
      { owner_id: 'usr_other' },
      { repository: { project_repository_id: 'prp_other', repository_id: repo.repository_id } },
      { repository: { project_repository_id: repo.project_repository_id, repository_id: 9999 } },
      { run_id: 'run_missing' },
    ]) {
      expect(await check(wrong), JSON.stringify(wrong)).toMatchObject({ confirmed: false, reason: expect.any(String) });
    }

    // Once the run has ended, its former holder attests nothing more; what it attested stands.
    await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' });
    expect((await failure(attest(claim_id, digest('d')))).code).toBe('already_settled');
    expect(await check({})).toEqual({ confirmed: true, reason: null });
  });
});
