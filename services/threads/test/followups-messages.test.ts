import { MessageAccepted, rpc } from '@threadwork/contracts';
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
});
