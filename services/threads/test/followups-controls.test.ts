import { ControlSubmission, TaskControlList, domainEvents, rpc, subjects } from '@threadwork/contracts';
import { decodeJson } from '@threadwork/platform';
import { newClaimId, waitFor } from '@threadwork/testing';
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
