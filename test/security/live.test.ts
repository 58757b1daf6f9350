import { headers } from '@nats-io/transport-node';
import { RunEventPage, subjects, ThreadWithRun } from '@threadwork/contracts';
import { encodeJson } from '@threadwork/platform';
import { RunDriver, sseFrames, waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startStack, type Stack, type TestUser } from '../support/stack.js';

// A run's live subject only wakes its followers: what they are sent is read from the log, checked
// for its owner. No service's key may publish there (test/security/nats.test.ts); this plays what
// a message put there anyway (a misconfigured account, the server's own credentials) would do.

const hasBinary = Boolean(inject('natsServerBin'));

let stack: Stack;
let alice: TestUser;
let runId: string;
let driver: RunDriver;

interface SseEvent {
  id: number;
  data: string;
}

/** Follows the run's SSE stream until `end`, pushing every event into `into` as it arrives. */
async function followSse(into: SseEvent[]): Promise<boolean> {
  const res = await stack.fetch(`/v1/runs/${runId}/events/stream?from=0`, { user: alice });
  expect(res.status).toBe(200);
  for await (const frame of sseFrames(res)) {
    if (frame.event === 'end') return true;
    if (frame.event === 'error') throw new Error(`stream failed: ${frame.data}`);
    if (frame.id !== undefined) into.push({ id: Number(frame.id), data: frame.data });
  }
  return false;
}

async function logOf(): Promise<RunEventPage> {
  const res = await stack.fetch(`/v1/runs/${runId}/events?from=0&limit=1000`, { user: alice });
  expect(res.status).toBe(200);
  return RunEventPage.parse(await res.json());
}

describe.skipIf(!hasBinary)('a message on a run’s live subject that the log does not hold', () => {
  beforeAll(async () => {
    stack = await startStack();
    alice = await stack.createUser('alice');
    const repoId = await stack.addRepo('live-forgery');
    const created = await stack.fetch('/v1/threads', {
      method: 'POST',
      user: alice,
      body: JSON.stringify({ repository_id: repoId, prompt: 'Say something' }),
    });
    expect(created.status).toBe(202);
    runId = ThreadWithRun.parse(await created.json()).run_id;
    driver = await RunDriver.claim(stack.nc, runId);
    await driver.start();
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('reaches no SSE stream and no long-poll; the events stored after it still do', { timeout: 120_000 }, async () => {
    const before = await logOf();
    const last = before.events.at(-1)!.sequence;
    const streams = [[], [], []] as SseEvent[][];
    const following = streams.map((into) => followSse(into));
    await waitFor('every stream to be at the end of the log', () => streams.every((s) => s.at(-1)?.id === last));
    const polled = stack
      .fetch(`/v1/runs/${runId}/events?from=${last + 1}&wait=30`, { user: alice })
      .then(async (res) => RunEventPage.parse(await res.json()));

    // As RUN_EVENTS would republish a stored event: its sequence follows the last one sent.
    const forged = (sequence: number) => {
      const h = headers();
      h.set('Nats-Sequence', String(sequence));
      h.set('Nats-Last-Sequence', String(last));
      const body = { chunk: { type: 'message.delta', delta: 'FORGED' }, created_at: new Date().toISOString() };
      stack.nc.publish(subjects.runLive(runId), encodeJson(body), { headers: h });
    };
    forged(last + 1);
    forged(last + 1_000_000);
    await stack.nc.flush();

    await driver.append({ type: 'command.output', item_id: 'c1', delta: 'stored' });
    await driver.to('completed');
    expect(await Promise.all(following)).toEqual([true, true, true]);

    const log = await logOf();
    // Woken (by the forgery, or by the stored event if it subscribed after the forgery), the
    // long-poll read the log again and answered what the log held.
    const woken = await polled;
    expect(JSON.stringify(woken.events)).not.toContain('FORGED');
    for (const event of woken.events) expect(log.events).toContainEqual(event);
    for (const stream of streams) {
      expect(stream.map((e) => e.id)).toEqual(log.events.map((e) => e.sequence));
      expect(stream.map((e) => e.data).join('\n')).not.toContain('FORGED');
      expect(stream.map((e) => e.data).join('\n')).toContain('stored');
    }
  });
});
