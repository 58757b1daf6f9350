import { Task, WorkList, domainEvents, rpc, type CandidateProducedEvent } from '@threadwork/contracts';
import { candidateProduced } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, texts, type Harness } from './support/harness.js';

describe('messages, queue and steer', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.stop();
  });

  /** A candidate of `thread`'s run on its primary repository (on `main`, no diff); `fields` change what a test looks at. */
  const candidateOf = (
    owner: string,
    thread: { id: string; run_id: string },
    fields: Partial<CandidateProducedEvent> & Pick<CandidateProducedEvent, 'project_repository_id'>,
  ) =>
    candidateProduced({
      thread_id: thread.id,
      run_id: thread.run_id,
      owner_id: owner,
      repository_id: h.repos.app,
      base_branch: 'main',
      diff: '',
      files: [],
      ...fields,
    });

  it('stores an assistant reply once however often its event arrives', async () => {
    const { thread, target } = await h.newThread();
    const reply = {
      thread_id: thread.id,
      run_id: thread.run_id,
      message_key: `${thread.run_id}:final`,
      text: 'All green.',
      at: new Date(Date.now() + 1).toISOString(),
    };
    await h.publishDomain(domainEvents.messageCompleted, reply, 'reply-a');
    await h.handledUpTo(await h.publishDomain(domainEvents.messageCompleted, reply, 'reply-b'));
    const list = await h.messages(target);
    expect(texts(list)).toEqual(['user:Start', 'assistant:All green.']);
    expect(list[1]?.id).toMatch(/^msg_[0-9a-f]{32}$/);
  });

  it('shows the lines the latest candidates changed in the work list, summed over repositories', async () => {
    const { owner, thread, target } = await h.newThread('Start', { repository_ids: [h.repos.lib] });
    // Candidates name the run's own project repositories, as its runner's do.
    const [app, lib] = (await h.call(rpc.threads.project, target)).repositories;
    if (!app || !lib) throw new Error('the thread has not both repositories');
    const workThread = async () =>
      WorkList.parse(await h.call(rpc.threads.work, { owner_id: owner }))
        .projects.flatMap((p) => p.threads)
        .find((t) => t.id === thread.id);
    expect(await workThread()).not.toHaveProperty('additions');

    const candidate = (
      repository: { id: string; repository_id: number },
      additions: number,
      deletions: number,
      at: number,
    ) =>
      h.publishDomain(
        domainEvents.candidateProduced,
        candidateOf(owner, thread, {
          project_repository_id: repository.id,
          repository_id: repository.repository_id,
          stats: { additions, deletions },
          at: new Date(at).toISOString(),
        }),
      );
    const now = Date.now();
    await h.handledUpTo(await candidate(app, 10, 2, now));
    await h.handledUpTo(await candidate(lib, 5, 1, now));
    expect(await workThread()).toMatchObject({ additions: 15, deletions: 3 });
    // A later run replaces its repository's figures; an older event delivered late does not.
    await h.handledUpTo(await candidate(app, 1, 0, now + 10));
    await h.handledUpTo(await candidate(app, 99, 99, now + 5));
    expect(await workThread()).toMatchObject({ additions: 6, deletions: 1 });
  });

  it('ignores a runner event its run’s holder did not publish: no reply, no applied steer, no figures, no status', async () => {
    const { owner, thread, target } = await h.newThread();
    const task = async () => Task.parse(await h.call(rpc.threads.get, { ...target, view: 'task' }));
    const steer = await h.call(rpc.threads.steer, { ...target, body: { prompt: 'Keep going' } });
    const at = new Date().toISOString();
    const forged = { forged: true };
    const runner = { run_id: thread.run_id, thread_id: thread.id };
    await h.publishDomain(
      domainEvents.messageCompleted,
      { ...runner, message_key: 'forged', text: 'FORGED', at },
      undefined,
      forged,
    );
    await h.publishDomain(
      domainEvents.controlApplied,
      { ...runner, control_id: steer.control.id, at },
      undefined,
      forged,
    );
    await h.publishDomain(
      domainEvents.sandboxStatus,
      { thread_id: thread.id, run_id: thread.run_id, status: 'failed', sandbox_id: 'sbx_1', reason: 'FORGED', at },
      undefined,
      forged,
    );
    // Of no run while the run is live: not a stop after idling.
    await h.publishDomain(
      domainEvents.sandboxStatus,
      { thread_id: thread.id, run_id: null, status: 'stopped', sandbox_id: 'sbx_1', reason: 'idle', at },
      undefined,
      forged,
    );
    const candidate = candidateOf(owner, thread, {
      project_repository_id: 'prp_forged',
      stats: { additions: 1000, deletions: 1000 },
      at,
    });
    await h.handledUpTo(await h.publishDomain(domainEvents.candidateProduced, candidate, undefined, forged));
    // Attested, but by the holder of a run of another owner's thread (naming its own repository), about this one.
    const other = await h.newThread();
    const [otherRepository] = (await h.call(rpc.threads.project, other.target)).repositories;
    const borrowed = { ...candidate, run_id: other.thread.run_id, project_repository_id: otherRepository!.id };
    await h.handledUpTo(await h.publishDomain(domainEvents.candidateProduced, borrowed));

    expect(texts(await h.messages(target))).toEqual(['user:Start']);
    const controls = await h.call(rpc.threads.controls, { ...target, view: 'thread' });
    expect(controls.controls.map((c) => c.status)).toEqual(['pending']);
    expect((await task()).sandbox_status).toBeNull();
    const work = WorkList.parse(await h.call(rpc.threads.work, { owner_id: owner }));
    expect(work.projects.flatMap((p) => p.threads).find((t) => t.id === thread.id)).not.toHaveProperty('additions');

    // The same events from the run's holder count.
    await h.handledUpTo(
      await h.publishDomain(domainEvents.messageCompleted, { ...runner, message_key: 'real', text: 'Real', at }),
    );
    expect(texts(await h.messages(target))).toEqual(['user:Start', 'assistant:Real']);
  });
});
