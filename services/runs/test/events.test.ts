import { rpc } from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';
import { newClaimId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admission, failure, runningRun, startHarness, type Harness } from './helpers.js';

const delta = (n: number) => ({ type: 'message.delta', item_id: 'msg', delta: `d${n}` });

/** Appends `count` deltas (keys `e<n>`) in batches of `batch`; returns their sequences. */
async function appendMany(
  nc: NatsConnection,
  held: { run: { id: string }; attempt: number; claim_id: string },
  start: number,
  count: number,
  batch = 500,
) {
  const fence = { run_id: held.run.id, attempt: held.attempt, claim_id: held.claim_id };
  const sequences: number[] = [];
  for (let i = start; i < start + count; i += batch) {
    const size = Math.min(batch, start + count - i);
    const events = Array.from({ length: size }, (_, j) => ({ key: `e${i + j}`, chunk: delta(i + j) }));
    sequences.push(...(await request(nc, rpc.runs.append, { ...fence, events })).sequences);
  }
  return sequences;
}

describe('run event log', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.stop();
  });

  it('pages by sequence: from, limit, next_sequence, and terminal only at the end of a terminal run', async () => {
    const held = await runningRun(h.nc);
    const { run, owner, attempt, claim_id } = held;
    const other = await runningRun(h.nc);
    // Another run's events in between: sequences of one run increase but are not contiguous.
    const mine: number[] = [];
    for (let i = 0; i < 5; i++) {
      mine.push(...(await appendMany(h.nc, held, i, 1)));
      await appendMany(h.nc, other, i, 1);
    }
    expect(mine).toEqual([...mine].sort((a, b) => a - b));
    expect(mine[1]! - mine[0]!).toBeGreaterThan(1);

    const head = await request(h.nc, rpc.runs.eventsPage, { owner_id: owner, run_id: run.id, from: 1, limit: 4 });
    // queued, starting, running, then the first delta
    expect(head.events.map((e) => (e.chunk as { type: string }).type)).toEqual([
      'run.status',
      'run.status',
      'run.status',
      'message.delta',
    ]);
    expect(head.events[3]?.sequence).toBe(mine[0]);
    expect(head).toMatchObject({ next_sequence: mine[0]! + 1, status: 'running', terminal: false, error: null });
    expect(Date.parse(head.events[0]!.created_at)).not.toBeNaN();

    const rest = await request(h.nc, rpc.runs.eventsPage, {
      owner_id: owner,
      run_id: run.id,
      from: head.next_sequence,
      limit: 100,
    });
    expect(rest.events.map((e) => e.sequence)).toEqual(mine.slice(1));
    expect(rest.events.map((e) => (e.chunk as { delta: string }).delta)).toEqual(['d1', 'd2', 'd3', 'd4']);
    expect(rest.terminal).toBe(false);

    const empty = await request(h.nc, rpc.runs.eventsPage, {
      owner_id: owner,
      run_id: run.id,
      from: rest.next_sequence,
      limit: 10,
    });
    expect(empty).toMatchObject({ events: [], next_sequence: rest.next_sequence, terminal: false });

    await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' });
    const beforeEnd = await request(h.nc, rpc.runs.eventsPage, { owner_id: owner, run_id: run.id, from: 1, limit: 3 });
    expect(beforeEnd).toMatchObject({ status: 'completed', terminal: false });
    const end = await request(h.nc, rpc.runs.eventsPage, {
      owner_id: owner,
      run_id: run.id,
      from: rest.next_sequence,
      limit: 10,
    });
    expect(end.events.map((e) => e.chunk)).toEqual([
      { type: 'run.status', status: 'completed', previous: 'running', attempt: 0 },
    ]);
    expect(end.terminal).toBe(true);
    const past = await request(h.nc, rpc.runs.eventsPage, {
      owner_id: owner,
      run_id: run.id,
      from: end.next_sequence + 50,
      limit: 10,
    });
    expect(past).toMatchObject({ events: [], next_sequence: end.next_sequence + 50, terminal: true });
  });

  it('stores a retried append once and returns the original sequences', async () => {
    const held = await runningRun(h.nc);
    const { run, owner } = held;
    const first = await appendMany(h.nc, held, 0, 3);
    const again = await appendMany(h.nc, held, 0, 3);
    expect(again).toEqual(first);
    const page = await request(h.nc, rpc.runs.eventsPage, {
      owner_id: owner,
      run_id: run.id,
      from: first[0]!,
      limit: 100,
    });
    expect(page.events.map((e) => e.sequence)).toEqual(first);
  });

  it('refuses appends to a run no runner holds yet, and reads of a run that does not exist', async () => {
    const { run } = await request(h.nc, rpc.runs.admit, admission());
    const events = [{ key: 'k', chunk: delta(0) }];
    const fence = { attempt: 0, claim_id: newClaimId(), events };
    expect((await failure(request(h.nc, rpc.runs.append, { run_id: run.id, ...fence }))).code).toBe('already_settled');
    expect((await failure(request(h.nc, rpc.runs.append, { run_id: 'run_missing', ...fence }))).code).toBe('not_found');
    // An id that could name no log (a dot would split its subject) is refused as no run, not as an outage.
    expect((await failure(request(h.nc, rpc.runs.append, { run_id: 'run.x', ...fence }))).code).toBe('not_found');
    expect(
      (
        await failure(
          request(h.nc, rpc.runs.eventsPage, { owner_id: 'usr_any', run_id: 'run_missing', from: 1, limit: 1 }),
        )
      ).code,
    ).toBe('not_found');
  });

  it('keeps pages of large events within one reply and refuses an event too large for any page', async () => {
    const held = await runningRun(h.nc);
    const { run, owner, attempt, claim_id } = held;
    const text = 'x'.repeat(200_000);
    const sequences: number[] = [];
    for (let i = 0; i < 6; i++) {
      const events = [{ key: `big${i}`, chunk: { type: 'command.output', item_id: 'cmd', delta: `${i}${text}` } }];
      sequences.push(
        ...(await request(h.nc, rpc.runs.append, { run_id: run.id, attempt, claim_id, events })).sequences,
      );
    }
    const first = await request(h.nc, rpc.runs.eventsPage, {
      owner_id: owner,
      run_id: run.id,
      from: sequences[0]!,
      limit: 100,
    });
    expect(first.events.length).toBeGreaterThan(0);
    expect(first.events.length).toBeLessThan(6);
    let from = first.next_sequence;
    const seen = [...first.events.map((e) => e.sequence)];
    while (seen.length < 6) {
      const page = await request(h.nc, rpc.runs.eventsPage, { owner_id: owner, run_id: run.id, from, limit: 100 });
      expect(page.events.length).toBeGreaterThan(0);
      seen.push(...page.events.map((e) => e.sequence));
      from = page.next_sequence;
    }
    expect(seen).toEqual(sequences);

    const tooBig = [{ key: 'huge', chunk: { type: 'command.output', item_id: 'cmd', delta: 'y'.repeat(300_000) } }];
    expect(
      (await failure(request(h.nc, rpc.runs.append, { run_id: run.id, attempt, claim_id, events: tooBig }))).code,
    ).toBe('payload_too_large');
  });

  it('delivers a log of 3,000 events page by page, each exactly once and in order', async () => {
    const held = await runningRun(h.nc);
    const { run, owner, attempt, claim_id } = held;
    const other = await runningRun(h.nc);
    const sequences: number[] = [];
    for (let i = 0; i < 3000; i += 500) {
      sequences.push(...(await appendMany(h.nc, held, i, 500)));
      await appendMany(h.nc, other, i, 100);
    }
    await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' });

    const seen: string[] = [];
    const seqs: number[] = [];
    let from = 1;
    let pages = 0;
    for (;;) {
      const page = await request(h.nc, rpc.runs.eventsPage, { owner_id: owner, run_id: run.id, from, limit: 250 });
      pages++;
      for (const e of page.events) {
        seqs.push(e.sequence);
        const chunk = e.chunk as { type: string; delta?: string };
        if (chunk.type === 'message.delta') seen.push(chunk.delta ?? '');
      }
      if (page.terminal) break;
      expect(page.events.length).toBeGreaterThan(0);
      from = page.next_sequence;
    }
    expect(seen).toEqual(Array.from({ length: 3000 }, (_, i) => `d${i}`));
    expect(seqs).toEqual([...new Set(seqs)].sort((a, b) => a - b));
    expect(seqs.filter((s) => sequences.includes(s))).toHaveLength(3000);
    // 3 status events before, 1 after: 3,004 events in pages of 250.
    expect(pages).toBe(Math.ceil(3004 / 250));
  });

  it('reads the tail page of a 5,000-event log as it reads the head, one page of work each', async () => {
    const held = await runningRun(h.nc);
    const { run, owner, attempt, claim_id } = held;
    const sequences = await appendMany(h.nc, held, 0, 5000);
    await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'completed' });

    const head = await request(h.nc, rpc.runs.eventsPage, { owner_id: owner, run_id: run.id, from: 1, limit: 100 });
    expect(head.events).toHaveLength(100);
    expect((head.events[3]?.chunk as { delta: string }).delta).toBe('d0');
    expect(head.terminal).toBe(false);

    const tail = await request(h.nc, rpc.runs.eventsPage, {
      owner_id: owner,
      run_id: run.id,
      from: sequences[4900]!,
      limit: 1000,
    });
    expect(tail.events).toHaveLength(101);
    expect(tail.events.slice(0, 100).map((e) => (e.chunk as { delta: string }).delta)).toEqual(
      Array.from({ length: 100 }, (_, i) => `d${4900 + i}`),
    );
    expect(tail.events.at(-1)?.chunk).toMatchObject({ type: 'run.status', status: 'completed' });
    expect(tail.terminal).toBe(true);

    const full = await request(h.nc, rpc.runs.eventsPage, {
      owner_id: owner,
      run_id: run.id,
      from: sequences[1000]!,
      limit: 1000,
    });
    expect(full.events).toHaveLength(1000);
    expect(full.next_sequence).toBe(sequences[1999]! + 1);
    expect(full.terminal).toBe(false);
  });
});
