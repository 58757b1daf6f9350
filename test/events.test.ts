import { RunEventPage, ThreadWithRun, type RunEvent } from '@threadwork/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack, type TestUser } from './support/stack.js';
import { RunDriver, sseFrames } from '@threadwork/testing';

// A reader that follows next_sequence across a long run receives each event exactly once, in
// order — by long-poll while the run is being written, and by SSE reconnecting mid-stream.

const TOTAL = 10_000;

let stack: Stack;
let user: TestUser;
let runId: string;
let driver: RunDriver;
let repoId: number;

beforeAll(async () => {
  stack = await startStack();
  user = await stack.createUser('reader');
  repoId = await stack.addRepo('long-run');
  const created = ThreadWithRun.parse(
    await (
      await stack.fetch('/v1/threads', {
        method: 'POST',
        user,
        body: JSON.stringify({ repository_id: repoId, prompt: 'Talk a lot' }),
      })
    ).json(),
  );
  runId = created.run_id;
  driver = await RunDriver.claim(stack.nc, runId);
  await driver.start();
});
afterAll(async () => {
  await stack?.stop();
});

async function writeEvents(): Promise<void> {
  const batch = 250;
  for (let i = 0; i < TOTAL; i += batch) {
    await driver.append(
      ...Array.from({ length: batch }, (_, j) => ({ type: 'command.output', item_id: 'c1', delta: `line ${i + j}` })),
    );
  }
  await driver.to('completed');
}

function indexOf(event: RunEvent): number | undefined {
  const chunk = event.chunk as { type: string; delta?: string };
  return chunk.type === 'command.output' ? Number(chunk.delta!.slice(5)) : undefined;
}

async function longPoll(): Promise<RunEvent[]> {
  const seen: RunEvent[] = [];
  let from = 1;
  for (;;) {
    const res = await stack.fetch(`/v1/runs/${runId}/events?from=${from}&limit=700&wait=5`, { user });
    if (res.status === 429 || res.status === 503) {
      // A follower of a run whose events trickle in asks often, and a busy machine may answer
      // `unavailable`: a good client waits as told and asks again from where it was.
      await new Promise((resolve) => setTimeout(resolve, Number(res.headers.get('retry-after') ?? 1) * 1000));
      continue;
    }
    const page = RunEventPage.parse(await res.json());
    seen.push(...page.events);
    expect(page.next_sequence).toBe(page.events.length ? page.events.at(-1)!.sequence + 1 : from);
    from = page.next_sequence;
    if (page.terminal) return seen;
  }
}

interface SseEvent {
  id: number;
  event: string;
  data: string;
}

/** Reads an SSE response until `stopAfter` events (then aborts, as a dropped connection would) or `end`. */
async function readSse(
  lastEventId: number | undefined,
  stopAfter: number,
): Promise<{ events: SseEvent[]; ended: boolean }> {
  const controller = new AbortController();
  const res = await stack.fetch(`/v1/runs/${runId}/events/stream`, {
    user,
    signal: controller.signal,
    headers: lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const events: SseEvent[] = [];
  try {
    for await (const frame of sseFrames(res)) {
      if (frame.event === 'end') return { events, ended: true };
      if (frame.id === undefined) continue;
      events.push({ id: Number(frame.id), event: frame.event ?? 'message', data: frame.data });
      if (events.length >= stopAfter) return { events, ended: false };
    }
    return { events, ended: false };
  } finally {
    controller.abort();
  }
}

describe('following a 10,000-event run', () => {
  it('by long-poll while it is written, and by SSE reconnecting mid-stream', { timeout: 240_000 }, async () => {
    const [polled] = await Promise.all([longPoll(), writeEvents()]);

    const indices = polled.map(indexOf).filter((i): i is number => i !== undefined);
    expect(indices).toHaveLength(TOTAL);
    expect(indices).toEqual(Array.from({ length: TOTAL }, (_, i) => i));
    const sequences = polled.map((e) => e.sequence);
    expect(new Set(sequences).size).toBe(sequences.length);
    expect([...sequences].sort((a, b) => a - b)).toEqual(sequences);

    // SSE: drop the connection three times mid-stream and resume with Last-Event-ID.
    const received: SseEvent[] = [];
    let lastId: number | undefined;
    let ended = false;
    for (let attempt = 0; attempt < 10 && !ended; attempt++) {
      const part = await readSse(lastId, attempt < 3 ? 3_000 : Number.MAX_SAFE_INTEGER);
      received.push(...part.events);
      ended = part.ended;
      lastId = received.at(-1)?.id;
    }
    expect(ended).toBe(true);
    expect(received.map((e) => e.id)).toEqual(sequences);
  });
});

describe('following a run live', () => {
  // Large events, so that the follower that does not read fills its socket's buffers: the gateway
  // must wait for them to drain, then go on, while the others are written as events come.
  const LIVE_TOTAL = 2_000;
  const PADDING = 'x'.repeat(10_000);

  /** Every `command.output` index a follower got, in order, and whether its stream ended. */
  async function readAll(res: Response): Promise<{ indices: number[]; ids: number[]; ended: boolean }> {
    const indices: number[] = [];
    const ids: number[] = [];
    for await (const frame of sseFrames(res)) {
      if (frame.event === 'end') return { indices, ids, ended: true };
      if (frame.id === undefined) continue;
      ids.push(Number(frame.id));
      const chunk = (JSON.parse(frame.data) as RunEvent).chunk as { type: string; delta?: string };
      if (chunk.type === 'command.output') indices.push(Number(chunk.delta!.split(' ')[1]));
    }
    return { indices, ids, ended: false };
  }

  it(
    'gives each follower every event once and in order, one that reads nothing meanwhile too',
    { timeout: 240_000 },
    async () => {
      const created = ThreadWithRun.parse(
        await (
          await stack.fetch('/v1/threads', {
            method: 'POST',
            user,
            body: JSON.stringify({ repository_id: repoId, prompt: 'Talk live' }),
          })
        ).json(),
      );
      const live = await RunDriver.claim(stack.nc, created.run_id);
      await live.start();
      const open = async () => {
        const res = await stack.fetch(`/v1/runs/${created.run_id}/events/stream`, { user });
        expect(res.status).toBe(200);
        return res;
      };
      const readers = await Promise.all([open(), open(), open()]);
      const idle = await open();
      const reading = readers.map(readAll);

      const batch = 20;
      for (let i = 0; i < LIVE_TOTAL; i += batch) {
        await live.append(
          ...Array.from({ length: batch }, (_, j) => ({
            type: 'command.output',
            item_id: 'c1',
            delta: `line ${i + j} ${PADDING}`,
          })),
        );
      }
      await live.to('completed');

      const expected = Array.from({ length: LIVE_TOTAL }, (_, i) => i);
      for (const got of [...(await Promise.all(reading)), await readAll(idle)]) {
        expect(got.ended).toBe(true);
        expect(got.indices).toEqual(expected);
        expect(new Set(got.ids).size).toBe(got.ids.length);
        expect([...got.ids].sort((a, b) => a - b)).toEqual(got.ids);
      }
    },
  );
});
