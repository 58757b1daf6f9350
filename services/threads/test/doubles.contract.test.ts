import { domainEvents, rpc, type AdmitRequest } from '@threadwork/contracts';
import { domainEventDigest, encodeJson, request } from '@threadwork/platform';
import { newClaimId, uniqueId } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { admission, failure, sharedSide, SIDES } from './support/sides.js';

// The threads tests keep doubles of the runs and repohost endpoints for what the real services do
// not let a test arrange: an admission whose answer is lost or held back, runs unreachable for
// exactly one call, a run that moves while its `live` answer travels, a run moved before its DOMAIN
// event is out, and an owner who sees no repository. Everything else they rely on is checked here
// against the real services, through the same cases, so the doubles cannot drift from them.
describe.each(SIDES)('runs and repohost as threads uses them (%s)', (_name, start) => {
  const side = sharedSide(start);

  const admit = (req: AdmitRequest) => request(side.runs.nc, rpc.runs.admit, req);

  it('admits by key with the defaults, one live run per thread, each owner seeing only their own', async () => {
    const req = admission();
    const { run } = await admit(req);
    expect(run).toMatchObject({
      id: req.run_id,
      thread_id: req.thread_id,
      project_id: req.project_id,
      message_id: req.message_id,
      status: 'queued',
      terminal: false,
      harness: 'codex',
      model: 'gpt-5-codex',
      reasoning_effort: 'medium',
      collaboration_mode: 'default',
      completed_at: null,
    });
    const chosen = await admit(
      admission({ model: 'gpt-5', collaboration_mode: 'plan', thread_id: uniqueId('thr_'), owner_id: req.owner_id }),
    );
    expect(chosen.run).toMatchObject({ model: 'gpt-5', collaboration_mode: 'plan' });

    // The same key is the same run, whatever else the request says.
    expect((await admit({ ...req, run_id: undefined, prompt: 'Other' })).run.id).toBe(run.id);
    const busy = await failure(
      side.runs.nc,
      rpc.runs.admit,
      admission({ owner_id: req.owner_id, thread_id: req.thread_id }),
    );
    expect(busy.code).toBe('thread_busy');

    const owner = { owner_id: req.owner_id };
    expect(await request(side.runs.nc, rpc.runs.get, { ...owner, run_id: run.id })).toMatchObject({ id: run.id });
    const stranger = { owner_id: uniqueId('usr_') };
    expect((await failure(side.runs.nc, rpc.runs.get, { ...stranger, run_id: run.id })).code).toBe('not_found');
    expect(
      (await request(side.runs.nc, rpc.runs.getMany, { ...owner, run_ids: [run.id, chosen.run.id, 'run_unknown'] }))
        .runs,
    ).toEqual(
      expect.arrayContaining([
        { id: run.id, status: 'queued' },
        { id: chosen.run.id, status: 'queued' },
      ]),
    );
    expect((await request(side.runs.nc, rpc.runs.getMany, { ...stranger, run_ids: [run.id] })).runs).toEqual([]);
    expect((await request(side.runs.nc, rpc.runs.live, { ...owner, thread_id: req.thread_id })).run?.id).toBe(run.id);
    expect((await request(side.runs.nc, rpc.runs.live, { ...stranger, thread_id: req.thread_id })).run).toBeNull();
    expect(await request(side.runs.nc, rpc.runs.liveCount, { ...owner, at_most: 5 })).toEqual({ live: 2 });
    expect(await request(side.runs.nc, rpc.runs.liveCount, { ...owner, at_most: 1 })).toEqual({ live: 1 });
  });

  it('frees the thread when its run ends; the ended run stays its key’s answer', async () => {
    const req = admission();
    const { run } = await admit(req);
    await side.runs.claim(run.id);
    await side.runs.end(run.id, 'completed');
    const owner = { owner_id: req.owner_id };
    const ended = await request(side.runs.nc, rpc.runs.get, { ...owner, run_id: run.id });
    expect(ended).toMatchObject({ status: 'completed', terminal: true, completed_at: expect.any(String) });
    expect((await request(side.runs.nc, rpc.runs.live, { ...owner, thread_id: req.thread_id })).run).toBeNull();
    expect(await request(side.runs.nc, rpc.runs.liveCount, { ...owner, at_most: 5 })).toEqual({ live: 0 });
    expect((await admit(req)).run).toMatchObject({ id: run.id, terminal: true });

    const next = await admit(admission({ owner_id: req.owner_id, thread_id: req.thread_id }));
    expect(next.run).toMatchObject({ status: 'queued', terminal: false });
    await side.runs.claim(next.run.id);
    await side.runs.end(next.run.id, 'failed');
    expect(await request(side.runs.nc, rpc.runs.get, { ...owner, run_id: next.run.id })).toMatchObject({
      status: 'failed',
      terminal: true,
    });
  });

  it('names the owner of a run to its holder only, while it is live', async () => {
    const req = admission();
    const { run } = await admit(req);
    const claimId = await side.runs.claim(run.id);
    expect(await request(side.runs.nc, rpc.runs.holder, { run_id: run.id, claim_id: claimId })).toEqual({
      owner_id: req.owner_id,
      repository_ids: [101],
    });
    const other = await failure(side.runs.nc, rpc.runs.holder, { run_id: run.id, claim_id: newClaimId() });
    expect(other.code).toBe('already_settled');
    await side.runs.end(run.id, 'completed');
    const after = await failure(side.runs.nc, rpc.runs.holder, { run_id: run.id, claim_id: claimId });
    expect(after.code).toBe('already_settled');
  });

  it('confirms a runner event only as attested, of its run’s thread and owner', async () => {
    const req = admission();
    const { run } = await admit(req);
    await side.runs.claim(run.id);
    const subject = domainEvents.messageCompleted.subject;
    const event = {
      thread_id: req.thread_id,
      run_id: run.id,
      message_key: 'k',
      text: 'Done.',
      at: new Date().toISOString(),
    };
    const digest = domainEventDigest(encodeJson(event));
    const ask = (
      fields: Partial<{
        thread_id: string;
        owner_id: string;
        digest: string;
        subject: string;
        repository: { project_repository_id: string; repository_id: number };
      }> = {},
    ) =>
      request(side.runs.nc, rpc.runs.attestation, {
        run_id: run.id,
        thread_id: req.thread_id,
        subject,
        digest,
        ...fields,
      });

    expect((await ask()).confirmed).toBe(false);
    await side.runs.attest(run.id, subject, digest);
    expect(await ask()).toEqual({ confirmed: true, reason: null });
    expect(await ask({ owner_id: req.owner_id })).toEqual({ confirmed: true, reason: null });
    expect((await ask({ thread_id: uniqueId('thr_') })).confirmed).toBe(false);
    expect((await ask({ owner_id: uniqueId('usr_') })).confirmed).toBe(false);
    // An event about one of the run's repositories names it as the run does.
    const [repository] = req.repositories;
    const named = { project_repository_id: repository!.project_repository_id, repository_id: 101 };
    expect(await ask({ repository: named })).toEqual({ confirmed: true, reason: null });
    expect((await ask({ repository: { ...named, project_repository_id: uniqueId('prr_') } })).confirmed).toBe(false);
    expect((await ask({ repository: { ...named, repository_id: 202 } })).confirmed).toBe(false);
    expect((await ask({ subject: domainEvents.controlApplied.subject })).confirmed).toBe(false);
    expect(
      (
        await request(side.runs.nc, rpc.runs.attestation, {
          run_id: 'run_unknown',
          thread_id: req.thread_id,
          subject,
          digest,
        })
      ).confirmed,
    ).toBe(false);
  });

  it('gives an owner the repositories asked for, in that order; not_found for one they cannot see', async () => {
    const owner = side.repohost.owner();
    const [primary, second] = side.repohost.ids;
    const { repositories } = await request(side.repohost.nc, rpc.repohost.access, {
      owner_id: owner,
      repository_ids: [second, primary],
    });
    expect(repositories.map((r) => [r.repository_id, r.default_branch])).toEqual([
      [second, 'trunk'],
      [primary, 'main'],
    ]);
    for (const repository of repositories) {
      expect(repository.full_name).toMatch(/\/(app|lib)$/);
      expect(repository.clone_url).toBeTruthy();
    }
    const missing = await failure(side.repohost.nc, rpc.repohost.access, {
      owner_id: owner,
      repository_ids: [primary, 999],
    });
    expect(missing.code).toBe('not_found');
  });
});
