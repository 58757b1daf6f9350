// What must hold once the database is back: every write whole or absent, and the live run's log intact.
import { rpc, type TaskList } from '@threadwork/contracts';
import { expect } from 'vitest';
import { getRun, logProblems, readLog, statusTrail, waitFor } from './api.js';
import { allPages, call, cluster, delta, messagesOf, retry, succeeded, textOf, user, workList } from './outage.js';
import type { Write } from './outage.js';
import type { RoundCalls, RoundSetup } from './outage-clients.js';

/**
 * Nothing half-written: creates and messages that got 503 converge once retried with their request
 * ids, a create never retried is absent or whole, and every cancelled run ends cancelled.
 */
export async function checkWrites(setup: RoundSetup, writes: Write[]): Promise<void> {
  const { queued } = setup;
  // Creates: every one that succeeded, and every other one that got 503 retried through the API
  // with its request id (twice: the same ids both times).
  const createWrites = writes.filter((w) => w.kind === 'create');
  const failedCreates = createWrites.filter((w) => !succeeded(w.outcome));
  const abandonedCreates = failedCreates.filter((_, i) => i % 2 === 1);
  const created = new Map<string, { thread_id: string; run_id: string; message_id: string }>();
  for (const w of createWrites) {
    if (abandonedCreates.includes(w)) continue;
    let answer = w.outcome;
    if (!succeeded(w.outcome)) {
      answer = await retry(w);
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      const again = await retry(w);
      const [a, b] = [answer.body, again.body] as { id: string; run_id: string; message_id: string }[];
      expect([again.status, b!.id, b!.run_id, b!.message_id]).toEqual([202, a!.id, a!.run_id, a!.message_id]);
    }
    const ids = answer.body as { id: string; run_id: string; message_id: string };
    created.set(w.prompt!, { thread_id: ids.id, run_id: ids.run_id, message_id: ids.message_id });
  }
  // Messages: every one that got 503 retried.
  const sent = new Map<string, { thread_id: string; run_id: string; message_id: string }>();
  for (const w of writes.filter((m) => m.kind === 'message')) {
    const answer = succeeded(w.outcome) ? w.outcome : await retry(w);
    expect(succeeded(answer), JSON.stringify(answer.body)).toBe(true);
    const ids = answer.body as { run_id: string; message_id: string };
    sent.set(w.prompt!, { thread_id: w.threadId!, run_id: ids.run_id, message_id: ids.message_id });
  }
  // Cancels: retried; each run asked ends cancelled.
  for (const w of writes.filter((c) => c.kind === 'cancel' && !succeeded(c.outcome))) {
    const answer = await retry(w);
    expect([200, 202], JSON.stringify(answer.body)).toContain(answer.status);
  }
  for (const thread of queued) {
    if (!writes.some((w) => w.kind === 'cancel' && w.path.includes(thread.run_id))) continue;
    const run = await waitFor(`run ${thread.run_id} to be cancelled`, async () => {
      const r = await getRun(cluster, user, thread.run_id);
      return r.terminal ? r : undefined;
    });
    expect(run.status).toBe('cancelled');
  }

  // The work list and the task list agree, list each thread once, and every thread has its run.
  // (Read until two reads agree: a run-status event redelivered after the outage may still be
  // recording the run of a create whose caller gave up, which makes that thread appear.)
  const listed = await waitFor('the work list and the task list to agree', async () => {
    const threads = (await workList()).projects.flatMap((p) => p.threads);
    const tasks = (await allPages<TaskList>('/v1/tasks')).flatMap((page) => page.tasks);
    const [a, b] = [threads.map((t) => t.id).sort(), tasks.map((t) => t.id).sort()];
    return JSON.stringify(a) === JSON.stringify(b) ? threads : undefined;
  });
  expect(new Set(listed.map((t) => t.id)).size, 'a thread listed twice').toBe(listed.length);
  for (const thread of listed) {
    expect(thread.latest_run, `thread ${thread.id} has no run`).not.toBeNull();
    expect((await getRun(cluster, user, thread.latest_run!.id)).thread_id).toBe(thread.id);
  }
  // One thread per create request, with its run and its one first message.
  for (const [prompt, ids] of created) {
    expect(
      listed.filter((t) => t.prompt === prompt).map((t) => t.id),
      prompt,
    ).toEqual([ids.thread_id]);
    const run = await getRun(cluster, user, ids.run_id);
    expect([run.thread_id, run.message_id]).toEqual([ids.thread_id, ids.message_id]);
    const shown = await messagesOf(ids.thread_id);
    expect(
      shown.map((m) => [m.id, textOf(m)]),
      prompt,
    ).toEqual([[ids.message_id, prompt]]);
  }
  // A create that got 503 and was never retried: absent, or whole (its run, its one message).
  for (const w of abandonedCreates) {
    const matching = listed.filter((t) => t.prompt === w.prompt);
    expect(matching.length, `${w.prompt} listed more than once`).toBeLessThanOrEqual(1);
    const [thread] = matching;
    if (!thread) continue;
    const run = await getRun(cluster, user, thread.latest_run!.id);
    // Shown once its run is recorded; a recorder cut off by the outage is caught up by the run's event.
    const shown = await waitFor(`the first message of ${thread.id}`, async () => {
      const m = await messagesOf(thread.id);
      return m.length > 0 ? m : undefined;
    });
    expect(shown.map((m) => [m.id, textOf(m)])).toEqual([[run.message_id, w.prompt]]);
  }
  // Each idle thread: its first message, then the one sent during the outage — once, with its run.
  for (const [prompt, ids] of sent) {
    const run = await getRun(cluster, user, ids.run_id);
    expect([run.thread_id, run.message_id]).toEqual([ids.thread_id, ids.message_id]);
    const shown = await messagesOf(ids.thread_id);
    expect(shown.map(textOf), prompt).toEqual([expect.stringMatching(/^idle r/), prompt]);
    expect(shown[1]!.id).toBe(ids.message_id);
  }
}

/** The run that was live across the outage: every event stored once, one terminal event. */
export async function checkLiveRun(setup: RoundSetup, appendKeys: RoundCalls['appendKeys']): Promise<void> {
  const { liveThread, driver } = setup;
  for (const { key } of appendKeys.filter((k) => !k.ok)) {
    await waitFor(`append ${key} to be taken`, async () =>
      succeeded(
        await call('rpc:append', rpc.runs.append, {
          run_id: driver.runId,
          attempt: driver.attempt,
          claim_id: driver.claimId,
          events: [delta(key)],
        }),
      ),
    );
  }
  await waitFor('the live run to be completed', async () => (await driver.to('completed')).terminal);
  const events = await readLog(cluster, user, liveThread.run_id);
  expect(logProblems(events), cluster.logs()).toEqual([]);
  expect(statusTrail(events).at(-1)).toBe('completed@0');
  const deltas = events
    .map((e) => e.chunk as { type: string; item_id?: string; delta?: string })
    .filter((c) => c.type === 'message.delta' && c.item_id === 'outage')
    .map((c) => c.delta);
  expect(deltas.sort()).toEqual(appendKeys.map((k) => `[${k.key}]`).sort());
  expect((await getRun(cluster, user, liveThread.run_id)).status).toBe('completed');
}
