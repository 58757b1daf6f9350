import {
  ControlSubmission,
  MessageAccepted,
  Task,
  TaskControlList,
  domainEvents,
  rpc,
  subjects,
  type CandidateProducedEvent,
  WorkList,
} from '@threadwork/contracts';
import { decodeJson } from '@threadwork/platform';
import { candidateProduced, newClaimId, waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishRunStatus } from './support/domain.js';
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

  it('admits a run for a message to an idle thread and refuses one while it is active', async () => {
    const { thread, target } = await h.newThread();
    const busy = await h.callError(rpc.threads.message, { ...target, body: { prompt: 'Too early' } });
    expect(busy.code).toBe('thread_busy');
    expect(texts(await h.messages(target))).toEqual(['user:Start']);
    // The losing send shows nothing; its message stays hidden (see the twin send below for why).
    expect(await h.db.collection('messages').countDocuments({ thread_id: thread.id, visible: true })).toBe(1);

    const { seq } = await h.runs.end(thread.run_id, 'completed');
    await h.handledUpTo(seq);
    const accepted = MessageAccepted.parse(
      await h.call(rpc.threads.message, { ...target, body: { prompt: 'Next', collaboration_mode: 'plan' } }),
    );
    expect(accepted).toMatchObject({ status: 'accepted', run_status: 'queued' });
    expect(accepted.run_id).not.toBe(thread.run_id);
    expect(await h.runs.run(accepted.run_id)).toMatchObject({
      message_id: accepted.message_id,
      collaboration_mode: 'plan',
    });
    expect(texts(await h.messages(target))).toEqual(['user:Start', 'user:Next']);
    const shown = await h.call(rpc.threads.get, { ...target, view: 'thread' });
    expect(shown).toMatchObject({ status: 'active', collaboration_mode: 'plan' });
  });

  it('shows a message id that lost the thread once with the text of the send that got it', async () => {
    const { thread, target } = await h.newThread();
    const busy = await h.callError(rpc.threads.message, { ...target, body: { prompt: 'Draft', message_id: 'm-1' } });
    expect(busy.code).toBe('thread_busy');
    await h.runs.end(thread.run_id, 'completed');
    const accepted = MessageAccepted.parse(
      await h.call(rpc.threads.message, { ...target, body: { prompt: 'Final', message_id: 'm-1' } }),
    );
    expect(accepted.message_id).toBe('m-1');
    const shown = await h.messages(target);
    expect(texts(shown)).toEqual(['user:Start', 'user:Final']);
    // Its time is when it was admitted, after everything before it.
    expect(shown[1]!.created_at >= (await h.runs.run(thread.run_id)).completed_at!).toBe(true);
    // A status event of the run (the crash-recovery path) finds it by its run.
    const stored = await h.db.collection('messages').findOne({ thread_id: thread.id, message_id: 'm-1' });
    expect(stored).toMatchObject({ run_id: accepted.run_id, visible: true });
  });

  it('replays a message with the same client_request_id and refuses another body under it', async () => {
    const { thread, target } = await h.newThread();
    await h.runs.end(thread.run_id, 'completed');
    const body = { prompt: 'Once', client_request_id: 'send-1' };
    const first = await h.call(rpc.threads.message, { ...target, body });
    // Active now, but the same request is the same answer, not thread_busy.
    expect(await h.call(rpc.threads.message, { ...target, body })).toEqual(first);
    const err = await h.callError(rpc.threads.message, { ...target, body: { ...body, prompt: 'Other' } });
    expect(err.code).toBe('idempotency_conflict');
    expect(await h.runs.created(thread.id)).toHaveLength(2);
  });

  it('applies a queue item at once while the thread is idle', async () => {
    const { thread, target } = await h.newThread();
    await h.runs.end(thread.run_id, 'completed');
    const submitted = ControlSubmission.parse(
      await h.call(rpc.threads.queue, { ...target, body: { prompt: 'Queued', message_id: 'q-msg' } }),
    );
    expect(submitted.control).toMatchObject({
      kind: 'queue',
      status: 'applied',
      thread_id: thread.id,
      prompt: 'Queued',
      prompt_parts: [{ type: 'text', text: 'Queued' }],
      collaboration_mode: 'default',
      target_run_id: null,
    });
    expect(submitted.control.applied_at).not.toBeNull();
    expect(submitted.run).toMatchObject({ run_status: 'queued', message_id: 'q-msg' });
    expect(submitted.control.created_run_id).toBe(submitted.run?.run_id);
    expect(texts(await h.messages(target))).toEqual(['user:Start', 'user:Queued']);
  });

  it('keeps a queue item pending while the thread is active and admits it once when the run ends', async () => {
    const { thread, target } = await h.newThread();
    const first = ControlSubmission.parse(await h.call(rpc.threads.queue, { ...target, body: { prompt: 'One' } }));
    const second = ControlSubmission.parse(await h.call(rpc.threads.queue, { ...target, body: { prompt: 'Two' } }));
    expect(first.control).toMatchObject({ status: 'pending', target_run_id: thread.run_id, created_run_id: null });
    expect(first.run).toBeNull();

    // The same terminal event, delivered twice (as a redelivery or a second publisher would).
    const { event } = await h.runs.end(thread.run_id, 'completed');
    await publishRunStatus(h.js, event, 'dup-a');
    const seq = await publishRunStatus(h.js, event, 'dup-b');
    await h.handledUpTo(seq);

    const controls = await h.call(rpc.threads.controls, { ...target, view: 'thread' });
    expect(controls.controls.map((c) => [c.id, c.status])).toEqual([
      [first.control.id, 'applied'],
      [second.control.id, 'pending'],
    ]);
    const runs = await h.runs.created(thread.id);
    expect(runs).toHaveLength(2);
    expect(controls.controls[0]?.created_run_id).toBe(runs[1]?.id);
    expect(texts(await h.messages(target))).toEqual(['user:Start', 'user:One']);
    expect(await h.call(rpc.threads.resumable, target)).toEqual({ run: { run_id: runs[1]?.id } });

    // That run ends too: the next item goes.
    const secondRun = runs[1];
    if (!secondRun) throw new Error('no second run');
    const next = await h.runs.end(secondRun.id, 'failed');
    await h.handledUpTo(next.seq);
    expect(await h.runs.created(thread.id)).toHaveLength(3);
    const pending = await h.call(rpc.threads.controls, { ...target, view: 'thread', status: 'pending' });
    expect(pending.controls).toEqual([]);
  });

  it('answers no_active_run to a steer of an idle thread', async () => {
    const { thread, target } = await h.newThread();
    await h.runs.cancel(thread.run_id);
    const err = await h.callError(rpc.threads.steer, { ...target, body: { prompt: 'Left' } });
    expect(err.code).toBe('no_active_run');
    expect((await h.call(rpc.threads.controls, { ...target, view: 'thread' })).controls).toEqual([]);
  });

  it('signals a steer to the live run and marks it applied when the harness takes it', async () => {
    const { thread, target } = await h.newThread();
    const signals = h.nc.subscribe(subjects.runSignal(thread.run_id), { max: 1 });
    const submitted = ControlSubmission.parse(
      await h.call(rpc.threads.steer, { ...target, body: { prompt: 'Use tabs' } }),
    );
    expect(submitted).toMatchObject({
      control: { kind: 'steer', status: 'pending', target_run_id: thread.run_id, created_run_id: null },
      run: null,
    });
    for await (const msg of signals) {
      // The signal names the control only: its text goes to the runner holding the run, on request.
      expect(decodeJson(msg.data)).toEqual({ type: 'steer', control_id: submitted.control.id });
    }

    const seq = await h.publishDomain(domainEvents.controlApplied, {
      control_id: submitted.control.id,
      run_id: thread.run_id,
      thread_id: thread.id,
      at: new Date().toISOString(),
    });
    await h.handledUpTo(seq);
    const list = TaskControlList.parse(await h.call(rpc.threads.controls, { ...target, view: 'task' }));
    expect(list.controls).toEqual([
      expect.objectContaining({
        id: submitted.control.id,
        task_id: thread.id,
        status: 'applied',
        created_run_id: null,
      }),
    ]);
    expect(list.controls[0]?.applied_at).not.toBeNull();

    // The run ends: an applied steer admits nothing.
    const ended = await h.runs.end(thread.run_id, 'completed');
    await h.handledUpTo(ended.seq);
    expect(await h.runs.created(thread.id)).toHaveLength(1);
  });

  it('gives a steer’s text only to the runner holding its run, while it is pending', async () => {
    const { thread, target } = await h.newThread();
    const other = await h.newThread();
    const { claimId } = await h.runs.claim(thread.run_id);
    const { claimId: otherClaim } = await h.runs.claim(other.thread.run_id);
    const submitted = await h.call(rpc.threads.steer, { ...target, body: { prompt: 'Use tabs' } });
    const read = (run_id: string, claim_id: string, control_id = submitted.control.id) =>
      h.call(rpc.threads.steerRead, { run_id, claim_id, control_id });
    const refused = (run_id: string, claim_id: string, control_id = submitted.control.id) =>
      h.callError(rpc.threads.steerRead, { run_id, claim_id, control_id });

    expect(await read(thread.run_id, claimId)).toEqual({ control_id: submitted.control.id, prompt: 'Use tabs' });
    // Not the holder: refused before anything about the control is looked at.
    expect((await refused(thread.run_id, newClaimId())).code).toBe('already_settled');
    // The holder of another run, naming this run's steer: no steer of its run.
    expect((await refused(other.thread.run_id, otherClaim)).code).toBe('not_found');
    // An unknown control, and a control that is not a steer.
    expect((await refused(thread.run_id, claimId, 'ctl_unknown')).code).toBe('not_found');
    const queued = await h.call(rpc.threads.queue, { ...target, body: { prompt: 'Later' } });
    expect((await refused(thread.run_id, claimId, queued.control.id)).code).toBe('not_found');

    // Applied: not again.
    await h.handledUpTo(
      await h.publishDomain(domainEvents.controlApplied, {
        control_id: submitted.control.id,
        run_id: thread.run_id,
        thread_id: thread.id,
        at: new Date().toISOString(),
      }),
    );
    expect((await refused(thread.run_id, claimId)).code).toBe('already_settled');
  });

  it('admits a steer whose run ended first as the next run', async () => {
    const { thread, target } = await h.newThread();
    const submitted = await h.call(rpc.threads.steer, { ...target, body: { prompt: 'Also update docs' } });
    await h.handledUpTo(
      await h.publishDomain(domainEvents.messageCompleted, {
        thread_id: thread.id,
        run_id: thread.run_id,
        message_key: `${thread.run_id}:reply`,
        text: 'Done.',
        at: new Date().toISOString(),
      }),
    );
    const { seq } = await h.runs.end(thread.run_id, 'completed');
    await h.handledUpTo(seq);

    const [control] = (await h.call(rpc.threads.controls, { ...target, view: 'thread' })).controls;
    const runs = await h.runs.created(thread.id);
    expect(runs).toHaveLength(2);
    expect(control).toMatchObject({ id: submitted.control.id, kind: 'steer', status: 'applied' });
    expect(control?.created_run_id).toBe(runs[1]?.id);
    expect(runs[1]?.message_id).toBe(
      (await h.messages(target)).find((m) => m.parts[0]?.text === 'Also update docs')?.id,
    );
    expect(texts(await h.messages(target))).toEqual(['user:Start', 'assistant:Done.', 'user:Also update docs']);
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

  it('pages messages oldest first with an opaque cursor', async () => {
    const { thread, target } = await h.newThread('m0');
    let runId = thread.run_id;
    for (let i = 1; i <= 4; i += 1) {
      await h.runs.end(runId, 'completed');
      runId = (await h.call(rpc.threads.message, { ...target, body: { prompt: `m${i}` } })).run_id;
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await h.call(rpc.threads.messages, { ...target, limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...page.messages.map((m) => m.parts[0]?.text ?? ''));
      cursor = page.next_cursor ?? undefined;
      pages += 1;
      expect(page.messages.length).toBeLessThanOrEqual(2);
    } while (cursor);
    expect(seen).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    expect(pages).toBe(3);

    const exact = await h.call(rpc.threads.messages, { ...target, limit: 5 });
    expect(exact.next_cursor).toBeNull();
    const bad = await h.callError(rpc.threads.messages, { ...target, limit: 5, cursor: 'garbage' });
    expect(bad.code).toBe('invalid_request');
  });

  it('queues and steers idempotently with a client_request_id', async () => {
    const { thread, target } = await h.newThread();
    const queue = { prompt: 'Q', client_request_id: 'q-1' };
    const steer = { prompt: 'S', client_request_id: 's-1' };
    const [q1, q2] = await Promise.all([
      h.call(rpc.threads.queue, { ...target, body: queue }),
      h.call(rpc.threads.queue, { ...target, body: queue }),
    ]);
    expect(q2.control.id).toBe(q1.control.id);
    const s1 = await h.call(rpc.threads.steer, { ...target, body: steer });
    const s2 = await h.call(rpc.threads.steer, { ...target, body: steer });
    expect(s2.control.id).toBe(s1.control.id);
    expect((await h.callError(rpc.threads.queue, { ...target, body: { ...queue, prompt: 'other' } })).code).toBe(
      'idempotency_conflict',
    );
    expect((await h.call(rpc.threads.controls, { ...target, view: 'thread' })).controls).toHaveLength(2);

    // Oldest first: the queue item goes before the steer once the run ends.
    const { seq } = await h.runs.end(thread.run_id, 'completed');
    await h.handledUpTo(seq);
    const runs = await h.runs.created(thread.id);
    expect(runs).toHaveLength(2);
    const after = await h.call(rpc.threads.queue, { ...target, body: queue });
    expect(after).toMatchObject({ control: { id: q1.control.id, status: 'applied' }, run: { run_id: runs[1]?.id } });
    await waitFor(
      'the applied follow-up among the messages',
      async () => {
        expect((await h.messages(target)).map((m) => m.parts[0]?.text)).toEqual(['Start', 'Q']);
        return true;
      },
      60_000,
      { tolerateErrors: true },
    );
  });
});
