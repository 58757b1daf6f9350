import { rpc, runEventLayout, subjects, type RunEventPage } from '@threadwork/contracts';
import {
  connectMongo,
  connectNats,
  createLogger,
  decodeJson,
  jetStreamOf,
  loadConfig,
  request,
  serviceDbName,
  type MongoClient,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import { baseServiceEnv, testInfra, waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveDueRuns, archiveRun, copyToArchive, purgeArchived } from '../src/flows/archive.js';
import type { RunsContext } from '../src/flows/context.js';
import { RunsConfig, startRuns } from '../src/index.js';
import { createEventArchive } from '../src/store/event-archive.js';
import { createEventLog } from '../src/store/event-log.js';
import { createInteractionStore } from '../src/store/interactions.js';
import { createRunStore } from '../src/store/runs.js';
import { readLog, runningRun, startHarness, type Harness, type LiveRun } from './helpers.js';

// The run event log split over several streams, and finished runs' logs moved to MongoDB: a
// reader gets the same pages (events, sequences, cursors, terminal) before and after, whoever
// archives and wherever an archiver stops.

const SHARDS = 4;
const layout = runEventLayout(SHARDS);
const logger = createLogger({ service: 'runs-archive-test', level: 'silent' });

/** An archiver of its own (its own NATS connection and MongoDB client), as another replica is. */
interface Archiver {
  ctx: RunsContext;
  close(): Promise<void>;
}

async function archiver(h: Harness): Promise<Archiver> {
  const nc = await connectNats({ servers: h.nats.url, auth: h.nats.testAuth, name: 'archiver', logger });
  const { js, jsm } = await jetStreamOf(nc);
  const mongo: MongoClient = await connectMongo({ url: testInfra().mongoUrl, appName: 'archiver' });
  const db = mongo.db(serviceDbName(h.dbPrefix, 'runs'));
  const config = loadConfig(RunsConfig, {
    ...baseServiceEnv(h.nats.env('runs'), h.dbPrefix),
    RUN_EVENT_SHARDS: String(SHARDS),
  });
  const ctx: RunsContext = {
    store: createRunStore(db),
    interactions: createInteractionStore(db),
    archive: createEventArchive(db),
    log: createEventLog({ nc, js, jsm, layout }),
    nc,
    js,
    config,
    logger,
  };
  return {
    ctx,
    async close() {
      await nc.close();
      await mongo.close();
    },
  };
}

const delta = (n: number) => ({ type: 'message.delta', item_id: 'msg', delta: `d${n}`, 'dotted.key': n });

async function append(nc: NatsConnection, held: LiveRun, keys: string[]): Promise<number[]> {
  const fence = { run_id: held.run.id, attempt: held.attempt, claim_id: held.claim_id };
  const events = keys.map((key, i) => ({ key, chunk: delta(i) }));
  return (await request(nc, rpc.runs.append, { ...fence, events })).sequences;
}

describe('sharded run event log and its archive', () => {
  let h: Harness;
  let a: Archiver;
  let b: Archiver;

  beforeAll(async () => {
    // No sweep here (0): the tests archive by hand, step by step.
    h = await startHarness({ RUN_EVENT_SHARDS: String(SHARDS), RUN_EVENTS_ARCHIVE_AFTER_MS: '0' });
    a = await archiver(h);
    b = await archiver(h);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await h?.stop();
  });

  /** A completed run with `count` deltas, another run's events between them. */
  async function finishedRun(count: number): Promise<{ runId: string; owner: string }> {
    const held = await runningRun(h.nc);
    const other = await runningRun(h.nc);
    for (let i = 0; i < count; i++) {
      await append(h.nc, held, [`e${i}`]);
      await append(h.nc, other, [`e${i}`]);
    }
    await request(h.nc, rpc.runs.transition, {
      run_id: held.run.id,
      attempt: held.attempt,
      claim_id: held.claim_id,
      to: 'completed',
    });
    return { runId: held.run.id, owner: held.owner };
  }

  /** Every page of the run's log, `limit` at a time from `from`, up to the first terminal page. */
  async function pages(run: { runId: string; owner: string }, limit: number, from = 1): Promise<RunEventPage[]> {
    const all: RunEventPage[] = [];
    for (;;) {
      const page = await request(h.nc, rpc.runs.eventsPage, { owner_id: run.owner, run_id: run.runId, from, limit });
      all.push(page);
      if (page.terminal) return all;
      if (all.length > 100) throw new Error('no terminal page after 100 pages');
      from = page.next_sequence;
    }
  }

  /** What a reader can see of a run: its pages at several sizes and starting points. */
  async function view(run: { runId: string; owner: string }) {
    const whole = await pages(run, 1000);
    const sequences = whole.flatMap((p) => p.events.map((e) => e.sequence));
    return {
      byThree: await pages(run, 3),
      byOne: await pages(run, 1),
      whole,
      fromMiddle: await pages(run, 2, sequences[4]!),
      pastEnd: await pages(run, 10, sequences.at(-1)! + 1),
    };
  }

  /** How many messages the run's subject holds in its stream. */
  async function stored(runId: string): Promise<number> {
    const subject = layout.subjectOf(runId);
    const info = await h.jsm.streams.info(layout.streamOf(runId), { subjects_filter: subject });
    return info.state.subjects?.[subject] ?? 0;
  }

  it("keeps each run's log in the stream its id hashes to and republishes it to run.live.<runId>", async () => {
    const held = await runningRun(h.nc);
    const runId = held.run.id;
    const live = h.nc.subscribe(subjects.runLive(runId), { max: 1 });
    await h.nc.flush();
    const [sequence] = await append(h.nc, held, ['live']);
    for await (const msg of live) {
      expect(msg.headers?.get('Nats-Sequence')).toBe(String(sequence));
      expect((decodeJson(msg.data) as { chunk: unknown }).chunk).toEqual(delta(0));
    }
    for (const [shard, stream] of layout.streams.entries()) {
      const info = await h.jsm.streams.info(stream, { subjects_filter: `run.events.*.${runId}` });
      const count = Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
      // queued, starting, running, and the delta: in the run's own shard, nowhere else.
      expect(count, stream).toBe(shard === layout.shardOf(runId) ? 4 : 0);
    }
    const names = [];
    for await (const name of h.jsm.streams.names()) names.push(name);
    expect(names.sort()).toEqual([...layout.streams, 'DOMAIN', 'RUN_JOBS'].sort());
  });

  it('serves the same pages after archiving, from MongoDB, and purges the run from its stream', async () => {
    const run = await finishedRun(7);
    const before = await view(run);
    // queued, starting, running, 7 deltas, completed
    expect(before.whole[0]!.events).toHaveLength(11);
    expect(before.byThree.at(-1)).toMatchObject({ terminal: true, status: 'completed' });
    expect(await stored(run.runId)).toBe(11);

    const marker = await archiveRun(a.ctx, run.runId);
    expect(marker).toMatchObject({ events: 11, last_sequence: before.whole[0]!.events.at(-1)!.sequence });
    expect(await stored(run.runId)).toBe(0);
    expect((await h.store.run(run.runId))?.events_archived_at).toBeInstanceOf(Date);

    expect(await view(run)).toEqual(before);
    // Archiving again changes nothing.
    await archiveRun(b.ctx, run.runId);
    expect(await view(run)).toEqual(before);
    expect(await h.archive.chunks.countDocuments({ run_id: run.runId })).toBe(1);
  });

  it('reads a long archived log from several chunks, page by page, as from the stream', async () => {
    const held = await runningRun(h.nc);
    const keys = Array.from({ length: 450 }, (_, i) => `long${i}`);
    await append(h.nc, held, keys.slice(0, 250));
    await append(h.nc, held, keys.slice(250));
    await request(h.nc, rpc.runs.transition, {
      run_id: held.run.id,
      attempt: held.attempt,
      claim_id: held.claim_id,
      to: 'completed',
    });
    const run = { runId: held.run.id, owner: held.owner };
    const before = { by100: await pages(run, 100), by7: await pages(run, 7, 150), whole: await pages(run, 1000) };
    const marker = await archiveRun(a.ctx, run.runId);
    // 3 statuses, 450 deltas, completed: chunks of at most 200 events.
    expect(marker.chunks.map(({ first, last }) => last >= first)).toEqual([true, true, true]);
    expect(marker.events).toBe(454);
    expect(await stored(run.runId)).toBe(0);
    expect({ by100: await pages(run, 100), by7: await pages(run, 7, 150), whole: await pages(run, 1000) }).toEqual(
      before,
    );
  });

  it('lets two archivers archive the same runs at once: each event stored once, none lost', async () => {
    const runs = [await finishedRun(3), await finishedRun(4), await finishedRun(5)];
    const before = await Promise.all(runs.map(view));
    await Promise.all(
      runs.flatMap((run) => [archiveRun(a.ctx, run.runId), archiveRun(b.ctx, run.runId), archiveRun(a.ctx, run.runId)]),
    );
    for (const [i, run] of runs.entries()) {
      expect(await stored(run.runId)).toBe(0);
      expect(await view(run)).toEqual(before[i]);
      const marker = await h.archive.marker(run.runId);
      const archived = await h.archive.readChunks(run.runId, marker!.chunks);
      expect(archived.map((e) => e.sequence)).toEqual(before[i]!.whole[0]!.events.map((e) => e.sequence));
      expect(await h.archive.chunks.countDocuments({ run_id: run.runId })).toBe(1);
      expect(await h.archive.markers.countDocuments({ _id: run.runId })).toBe(1);
    }
  });

  it('keeps an event appended after the copy in the stream and serves it after the archived ones', async () => {
    const run = await finishedRun(2);
    const before = (await pages(run, 1000))[0]!.events;
    const marker = await copyToArchive(a.ctx, run.runId);
    const [late] = await a.ctx.log.append(run.runId, [{ key: 'late', chunk: { type: 'usage', input_tokens: 1 } }]);
    await purgeArchived(b.ctx, marker);
    expect(await stored(run.runId)).toBe(1);

    const all = await readLog(h, run.runId);
    expect(all.map((e) => e.sequence)).toEqual([...before.map((e) => e.sequence), late]);
    const byTwo = await pages(run, 2);
    expect(byTwo.flatMap((p) => p.events.map((e) => e.sequence))).toEqual(all.map((e) => e.sequence));
    expect(byTwo.at(-1)).toMatchObject({ terminal: true, next_sequence: late! + 1 });
    // A page of the archived events ending at the archive's end says the log goes on.
    const archivedOnly = await request(h.nc, rpc.runs.eventsPage, {
      owner_id: run.owner,
      run_id: run.runId,
      from: 1,
      limit: before.length,
    });
    expect(archivedOnly).toMatchObject({ terminal: false, next_sequence: marker.last_sequence + 1 });
  });

  it('archives a run whose copy an archiver left shorter than the log, before any record', async () => {
    const run = await finishedRun(3);
    const before = await view(run);
    // An archiver copied the first events, then stopped; the log has more now.
    await a.ctx.archive.write(run.runId, await a.ctx.log.read(run.runId, 1, 4));
    const marker = await archiveRun(b.ctx, run.runId);
    expect(marker.events).toBe(7);
    expect(await stored(run.runId)).toBe(0);
    expect(await view(run)).toEqual(before);
  });

  it('records and purges nothing when a stored chunk holds other events than the log', async () => {
    const run = await finishedRun(3);
    const before = await view(run);
    const [first] = await a.ctx.log.read(run.runId, 1, 1);
    // A chunk under the run's first chunk id that is not a copy of its log (nor a prefix of it).
    await h.archive.chunks.insertOne({
      _id: `${run.runId}:${first!.sequence}`,
      run_id: run.runId,
      first: first!.sequence,
      last: first!.sequence,
      events: [
        { s: first!.sequence, c: JSON.stringify({ type: 'message.delta', delta: 'forged' }), t: first!.created_at },
      ],
    });
    await expect(archiveRun(b.ctx, run.runId)).rejects.toMatchObject({ code: 'internal' });
    expect(await b.ctx.archive.marker(run.runId)).toBeNull();
    expect(await stored(run.runId)).toBe(7);
    expect(await view(run)).toEqual(before);
  });

  it('does not let runs whose archiving fails keep the others from their turn', async () => {
    // A full pass of runs that cannot be archived (their ids cannot name a subject), older than
    // any other: the first pass fails them all, and the next one goes on to the rest.
    const broken = Array.from({ length: 100 }, (_, i) => `run_broken.${i}`);
    await h.store.runs.insertMany(
      broken.map((_id) => ({ _id, terminal: true, status: 'completed', completed_at: new Date(0) }) as never),
    );
    try {
      const run = await finishedRun(2);
      // As far ahead as the window, so every ended run is due.
      const now = new Date(Date.now() + a.ctx.config.RUN_EVENTS_ARCHIVE_AFTER_MS + 60_000);
      expect(await archiveDueRuns(a.ctx, now)).toBe(0);
      expect(await a.ctx.archive.marker(run.runId)).toBeNull();
      const failed = await h.store.runs.find({ _id: { $in: broken } }).toArray();
      expect(failed.every((r) => r.events_archive_retry_at && r.events_archive_retry_at > now)).toBe(true);
      expect(await archiveDueRuns(a.ctx, now)).toBeGreaterThan(0);
      expect(await a.ctx.archive.marker(run.runId)).not.toBeNull();
    } finally {
      await h.store.runs.deleteMany({ _id: { $in: broken } });
    }
  });

  it('loses nothing and serves nothing twice when an archiver stops between copy and purge; a replica finishes', async () => {
    const run = await finishedRun(5);
    const before = await view(run);

    // Stopped after writing the copy, before recording it: readers still read the stream.
    const logged = await a.ctx.log.read(run.runId, 1, 1000);
    expect(await a.ctx.archive.write(run.runId, logged)).toEqual([
      { first: logged[0]!.sequence, last: logged.at(-1)!.sequence },
    ]);
    expect(await a.ctx.archive.marker(run.runId)).toBeNull();
    expect(await view(run)).toEqual(before);

    // Stopped after recording it, before the purge: readers read the archive, the stream is whole.
    const crashed = await archiver(h);
    await copyToArchive(crashed.ctx, run.runId);
    await crashed.close();
    expect(await stored(run.runId)).toBe(9);
    expect(await view(run)).toEqual(before);

    // Another replica of the service, sweeping, finishes the job (as the `runs` NATS user).
    const replica: StartedService = await startRuns(
      loadConfig(RunsConfig, {
        ...baseServiceEnv(h.nats.env('runs'), h.dbPrefix),
        RUN_EVENT_SHARDS: String(SHARDS),
        RUN_EVENTS_ARCHIVE_AFTER_MS: '200',
      }),
    );
    try {
      await waitFor('the replica to purge the run', async () => (await stored(run.runId)) === 0);
      await waitFor('the run to be marked archived', async () => (await h.store.run(run.runId))?.events_archived_at);
    } finally {
      await replica.stop();
    }
    expect(await view(run)).toEqual(before);
    expect(await h.archive.chunks.countDocuments({ run_id: run.runId })).toBe(1);
  });
});

describe('run event shard count', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.stop();
  });

  const start = (shards: number) =>
    startRuns(
      loadConfig(RunsConfig, { ...baseServiceEnv(h.nats.env('runs'), h.dbPrefix), RUN_EVENT_SHARDS: String(shards) }),
    );
  const streamNames = async () => {
    const names: string[] = [];
    for await (const name of h.jsm.streams.names()) names.push(name);
    return names.sort();
  };

  it('refuses to start with another count than the streams in place, and changes no stream', async () => {
    // The harness's service made the single stream RUN_EVENTS (the default, one shard).
    expect(await streamNames()).toEqual(['DOMAIN', 'RUN_EVENTS', 'RUN_JOBS']);
    await expect(start(4)).rejects.toThrow(
      /RUN_EVENT_SHARDS is 4, but the run event log in place is split into 1 stream/,
    );
    expect(await streamNames()).toEqual(['DOMAIN', 'RUN_EVENTS', 'RUN_JOBS']);

    // An install made with 4 shards (here: the old stream gone by hand) refuses 1 and 8, takes 4.
    await h.service.stop();
    await h.jsm.streams.delete('RUN_EVENTS');
    const four = await start(4);
    await four.stop();
    const sharded = ['DOMAIN', 'RUN_EVENTS_0', 'RUN_EVENTS_1', 'RUN_EVENTS_2', 'RUN_EVENTS_3', 'RUN_JOBS'];
    expect(await streamNames()).toEqual(sharded);
    await expect(start(1)).rejects.toThrow(/RUN_EVENT_SHARDS is 1, .* into 4 stream.*RUN_EVENT_SHARDS=4/);
    await expect(start(8)).rejects.toThrow(/RUN_EVENT_SHARDS is 8, .* into 4 stream/);
    await expect(start(2)).rejects.toThrow(/RUN_EVENT_SHARDS is 2, .* into 4 stream/);
    expect(await streamNames()).toEqual(sharded);
    const again = await start(4);
    await again.stop();
  });
});
