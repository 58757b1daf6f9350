import {
  ControlSubmission,
  MessageAccepted,
  Task,
  domainEvents,
  rpc,
  type RunStatusEvent,
} from '@threadwork/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishRunStatus } from './support/domain.js';
import { startHarnessWithDoubles, texts, type DoublesHarness } from './support/harness.js';

// What the real services do not let a test arrange: an admission whose answer is held back or
// lost, a run that ends while its `live` answer travels, runs moved without their DOMAIN events.
describe('messages, queue and steer against the doubles', () => {
  let h: DoublesHarness;

  beforeAll(async () => {
    h = await startHarnessWithDoubles();
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('keeps the message of a send whose twin lost the thread while it was being admitted', async () => {
    // Two attempts of one send (a client's retry after a timeout: the same client_request_id, so
    // the same ids). The first reaches runs while the thread is busy, the second once it is free;
    // the first's thread_busy arrives while the second is being admitted, and must not take the
    // message the second then shows.
    const { thread, target } = await h.newThread();
    const body = { prompt: 'Retried', client_request_id: 'retry-1' };
    const first = h.runs.holdNextAdmit();
    const losing = h.callError(rpc.threads.message, { ...target, body });
    await first.received;
    h.runs.setStatus(thread.run_id, 'completed');
    const second = h.runs.holdNextAdmit();
    const winning = h.call(rpc.threads.message, { ...target, body });
    await second.received;
    first.release();
    expect((await losing).code).toBe('thread_busy');
    second.release();
    const accepted = MessageAccepted.parse(await winning);
    expect(h.runs.run(accepted.run_id).message_id).toBe(accepted.message_id);
    expect(texts(await h.messages(target))).toEqual(['user:Start', 'user:Retried']);
  });

  it('applies a queue item whose admission answer was lost when the run-ended event is retried', async () => {
    // runs admits the queue item's run, but its answer never arrives (runs.admit timing out on a
    // busy machine): the retried event finds the thread busy with that very run.
    const { thread, target } = await h.newThread();
    const queued = ControlSubmission.parse(await h.call(rpc.threads.queue, { ...target, body: { prompt: 'After' } }));
    expect(queued.control.status).toBe('pending');
    h.runs.loseNextAdmitAnswer();
    const { seq } = await h.runs.transition(thread.run_id, 'completed');
    await h.handledUpTo(seq);

    const runs = h.runs.created(thread.id);
    expect(runs).toHaveLength(2);
    const [control] = (await h.call(rpc.threads.controls, { ...target, view: 'thread' })).controls;
    expect(control).toMatchObject({ id: queued.control.id, status: 'applied', created_run_id: runs[1]?.id });
    expect(texts(await h.messages(target))).toEqual(['user:Start', 'user:After']);
    expect(await h.call(rpc.threads.resumable, target)).toEqual({ run: { run_id: runs[1]?.id } });
  });

  it('answers a retried queue request whose admission answer was lost with the run it admitted', async () => {
    // The first attempt's run is admitted but its answer lost (a 503 to the client); the client's
    // retry (the same client_request_id) finds the thread busy with that very run.
    const { thread, target } = await h.newThread();
    h.runs.setStatus(thread.run_id, 'completed');
    const body = { prompt: 'Lost', client_request_id: 'queue-lost-1' };
    h.runs.loseNextAdmitAnswer();
    const err = await h.callError(rpc.threads.queue, { ...target, body });
    expect(err.code).toBe('unavailable');
    const [, run] = h.runs.created(thread.id);
    if (!run) throw new Error('the double created no run');

    const retried = ControlSubmission.parse(await h.call(rpc.threads.queue, { ...target, body }));
    expect(retried.control).toMatchObject({ status: 'applied', created_run_id: run.id });
    expect(retried.run).toMatchObject({ run_id: run.id, run_status: 'queued' });
    expect(texts(await h.messages(target))).toEqual(['user:Start', 'user:Lost']);
    expect(h.runs.created(thread.id)).toHaveLength(2);
  });

  it('admits a steer at once when its run ended between the check and the write', async () => {
    const { thread, target } = await h.newThread();
    // runs answers "live", then the run ends before threads stores the steer; threads has not
    // handled the terminal event yet, so nobody else would admit the steer.
    let ended: RunStatusEvent | undefined;
    h.runs.afterNextLive(() => {
      ended = h.runs.setStatus(thread.run_id, 'completed');
    });
    const submitted = ControlSubmission.parse(await h.call(rpc.threads.steer, { ...target, body: { prompt: 'Late' } }));
    const runs = h.runs.created(thread.id);
    expect(runs).toHaveLength(2);
    expect(submitted.control).toMatchObject({ status: 'applied', target_run_id: thread.run_id });
    expect(submitted.run?.run_id).toBe(runs[1]?.id);
    // The terminal event arriving afterwards admits nothing more.
    if (!ended) throw new Error('the run did not end');
    await h.handledUpTo(await publishRunStatus(h.js, ended));
    expect(h.runs.created(thread.id)).toHaveLength(2);
  });

  it('derives statuses from the latest run and the sandbox events', async () => {
    const { thread, target } = await h.newThread();
    const task = async () => Task.parse(await h.call(rpc.threads.get, { ...target, view: 'task' }));
    const sandbox = (status: string, at: Date) =>
      h.publishDomain(domainEvents.sandboxStatus, {
        thread_id: thread.id,
        run_id: thread.run_id,
        status,
        sandbox_id: 'sbx_1',
        reason: null,
        at: at.toISOString(),
      });
    expect((await task()).status).toBe('setup');

    const now = Date.now();
    await h.handledUpTo(await sandbox('initializing', new Date(now)));
    h.runs.setStatus(thread.run_id, 'starting');
    expect(await task()).toMatchObject({ status: 'setup', sandbox_status: 'initializing' });

    await h.handledUpTo(await sandbox('ready', new Date(now + 10)));
    // A stale event delivered late does not win.
    await h.handledUpTo(await sandbox('initializing', new Date(now + 5)));
    h.runs.setStatus(thread.run_id, 'running');
    expect(await task()).toMatchObject({ status: 'running', sandbox_status: 'ready' });

    h.runs.setStatus(thread.run_id, 'waiting_for_input');
    expect((await task()).status).toBe('waiting');
    expect((await h.call(rpc.threads.get, { ...target, view: 'thread' })).status).toBe('active');

    const { seq } = await h.runs.transition(thread.run_id, 'completed');
    await h.handledUpTo(seq);
    expect((await task()).status).toBe('ready');
    expect((await h.call(rpc.threads.get, { ...target, view: 'thread' })).status).toBe('idle');
    expect(await h.call(rpc.threads.resumable, target)).toEqual({ run: null });

    // A follow-up into a reclaimed sandbox is running, not setup again.
    await h.handledUpTo(await sandbox('initializing', new Date(now + 20)));
    const follow = await h.call(rpc.threads.message, { ...target, body: { prompt: 'More' } });
    expect((await task()).status).toBe('running');
    h.runs.setStatus(follow.run_id, 'failed');
    expect((await task()).status).toBe('failed');
    const list = await h.call(rpc.threads.list, { owner_id: target.owner_id });
    expect(list.tasks.map((t) => [t.id, t.status])).toEqual([[thread.id, 'failed']]);
  });
});
