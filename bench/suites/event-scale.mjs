// Benchmark 11: one run's events page when the event log holds many runs. The log of 300,000 runs
// (10 events each, written in waves of runs live at once, so a run's events sit between other
// runs' as they do in production) is written to one stream (RUN_EVENTS, RUN_EVENT_SHARDS=1) and
// to N streams chosen by run id (run-event-shards.ts), each on a nats-server of its own (file
// store, as deployed); the first `archived` of them are archived to MongoDB (FerretDB here) in the
// runs service's archive shape. Then pages of random runs are read from each, in alternating
// rounds, the way the runs service reads them: a batch direct get by the run's subject from its
// stream, and for an archived run its archive record and chunks by `_id`. FerretDB 1.24 (SQLite)
// serves even an `_id` lookup by scanning the collection, so an archived page there costs in
// proportion to the archive's bytes: the archive side is kept small by default (5,000 runs) and
// its figure is FerretDB's, not MongoDB's, whose `_id` index makes the same lookups O(log n).
//
// Cost, bounded by the options: 2 × runs × events publishes (one server each) and `archived` runs' documents
// (defaults: 6,000,000 messages, about 0.6 GB of stream files per server, and 5,000 documents of
// ~1.5 KB in FerretDB; all in a temporary directory removed at the end), then `reads` pages per
// side. About 20 minutes on a busy two-core machine (seeding is most of it: ~5,000 publishes/s
// there); `--quick` is 30,000 runs.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runEventLayout, runEventsStreams } from '@threadwork/contracts';
import { connectMongo, connectNats, createLogger, encodeJson, ensureStream, jetStreamOf } from '@threadwork/platform';
import { startNatsServer } from '../../deploy/local/servers.mjs';
import { toolPath } from '../../deploy/local/tools.mjs';
import { mib, residentMemory } from '../lib/proc.mjs';
import { int, ms, percentile, summaryRow, table } from '../lib/report.mjs';
import { outputChunk } from '../lib/runs.mjs';
import { nowMs } from '../lib/sse.mjs';
import { log } from '../lib/stack.mjs';

const logger = createLogger({ service: 'bench-event-scale', level: 'error' });
/** What the runs service lets a page pass before it stops (half of the default max_payload). */
const PAGE_BYTES = 512 * 1024;
/** Publishes awaited together while seeding: enough to keep the server busy, few enough to keep it acking. */
const IN_FLIGHT = 1_000;
/** Archived events per chunk document, as the runs service cuts them. */
const CHUNK_EVENTS = 200;

const runIdOf = (i) => `run_${((i * 2654435761) >>> 0).toString(36)}_${i.toString(36)}`;

/** A nats-server of its own with the run event streams of `shards`, and a client on it. */
async function eventServer(dir, shards, maxAgeMs = 0) {
  const server = await startNatsServer({ binary: toolPath('nats-server'), dir });
  const nc = await connectNats({ servers: server.url, name: `bench-event-scale-${shards}`, logger });
  const { js, jsm } = await jetStreamOf(nc);
  for (const def of runEventsStreams({ maxAgeMs, shards })) await ensureStream(jsm, def);
  return { server, nc, js, jsm, layout: runEventLayout(shards) };
}

/**
 * Writes `events` events to each of `runs` runs: `live` runs at a time, each wave's runs taking
 * turns (one event each, round and round), as concurrent runs interleave in the log.
 */
async function seed(side, { runs, events, live }) {
  const createdAt = new Date().toISOString();
  const payloads = Array.from({ length: events }, (_, e) =>
    encodeJson({ chunk: outputChunk(e), created_at: createdAt }),
  );
  let pending = [];
  const started = nowMs();
  for (let w = 0; w < runs; w += live) {
    const wave = Math.min(live, runs - w);
    for (let e = 0; e < events; e++) {
      for (let r = 0; r < wave; r++) {
        pending.push(side.js.publish(side.layout.subjectOf(runIdOf(w + r)), payloads[e]));
        if (pending.length >= IN_FLIGHT) {
          await Promise.all(pending);
          pending = [];
        }
      }
    }
  }
  await Promise.all(pending);
  return nowMs() - started;
}

/** Copies the runs' logs as the archive holds them: one record and `ceil(events / 200)` chunks per run. */
async function seedArchive(db, { runs, events }) {
  const chunks = db.collection('run_event_chunks');
  const markers = db.collection('run_event_archives');
  const createdAt = new Date().toISOString();
  const started = nowMs();
  let chunkBatch = [];
  let markerBatch = [];
  const flush = async () => {
    await Promise.all([
      chunkBatch.length && chunks.insertMany(chunkBatch, { ordered: false }),
      markerBatch.length && markers.insertMany(markerBatch, { ordered: false }),
    ]);
    chunkBatch = [];
    markerBatch = [];
  };
  for (let i = 0; i < runs; i++) {
    const runId = runIdOf(i);
    // Sequences as a run's would be in a shared stream: increasing, with other runs' in the gaps.
    const sequences = Array.from({ length: events }, (_, e) => 1 + i + e * 1000);
    const ranges = [];
    for (let k = 0; k < events; k += CHUNK_EVENTS) {
      const part = sequences.slice(k, k + CHUNK_EVENTS);
      const first = part[0];
      ranges.push({ first, last: part.at(-1) });
      chunkBatch.push({
        _id: `${runId}:${first}`,
        run_id: runId,
        first,
        last: part.at(-1),
        events: part.map((s, j) => ({ s, c: JSON.stringify(outputChunk(k + j)), t: createdAt })),
      });
    }
    markerBatch.push({
      _id: runId,
      last_sequence: sequences.at(-1),
      events,
      chunks: ranges,
      archived_at: new Date(),
      purged_at: new Date(),
    });
    if (markerBatch.length >= 500) await flush();
  }
  await flush();
  return nowMs() - started;
}

/** One page of the run from its stream, as the runs service reads it; returns its event count. */
async function streamPage(side, runId, limit) {
  const batch = await side.jsm.direct.getBatch(side.layout.streamOf(runId), {
    seq: 1,
    next_by_subj: side.layout.subjectOf(runId),
    batch: limit,
    max_bytes: PAGE_BYTES,
  });
  let n = 0;
  for await (const m of batch) {
    m.json();
    n++;
  }
  return n;
}

/** One page of an archived run, as the runs service reads it: its record, then its chunks by `_id`. */
async function archivePage(db, runId, limit) {
  const marker = await db.collection('run_event_archives').findOne({ _id: runId });
  let n = 0;
  for (const { first } of marker.chunks) {
    const chunk = await db.collection('run_event_chunks').findOne({ _id: `${runId}:${first}` });
    for (const e of chunk.events) {
      JSON.parse(e.c);
      if (++n >= limit) return n;
    }
  }
  return n;
}

function stats(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean: sorted.reduce((s, x) => s + x, 0) / sorted.length,
  };
}

/** Seconds from a SIGKILL until the server answers for every stream again. */
async function restartSeconds(side, dir) {
  await side.nc.close();
  await side.server.stop('SIGKILL');
  const started = nowMs();
  side.server = await startNatsServer({ binary: toolPath('nats-server'), dir });
  side.nc = await connectNats({ servers: side.server.url, name: 'bench-event-scale-restarted', logger });
  Object.assign(side, await jetStreamOf(side.nc));
  for (const name of side.layout.streams) await side.jsm.streams.info(name);
  return (nowMs() - started) / 1000;
}

/**
 * Benchmark 11. `runs` runs of `events` events, `live` at a time; `shards` streams against one;
 * `reads` pages (limit 100: the whole run) of random runs per side, in `rounds` alternating rounds.
 */
export async function eventScaleBenchmark(stack, { runs, events, live, shards, reads, rounds, archived }) {
  archived = Math.min(archived, runs);
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-bench-event-scale-'));
  const sides = [];
  let mongo;
  try {
    const one = await eventServer(join(dir, 'one'), 1);
    sides.push(one);
    const sharded = await eventServer(join(dir, 'sharded'), shards);
    sides.push(sharded);
    mongo = await connectMongo({ url: stack.ferret.url, appName: 'bench-event-scale' });
    const db = mongo.db(`${stack.dbPrefix}_event_scale`);

    log(`event-scale: writing ${int(runs)} runs × ${events} events to 1 stream…`);
    const seedOneMs = await seed(one, { runs, events, live });
    log(`event-scale: … and to ${shards} streams…`);
    const seedShardedMs = await seed(sharded, { runs, events, live });
    log(`event-scale: archiving ${int(archived)} of the runs to FerretDB…`);
    const seedArchiveMs = await seedArchive(db, { runs: archived, events });

    // Every page read must be the whole run: a page that found less measured nothing.
    const check = (n, what, runId) => {
      if (n !== events) throw new Error(`${what}: ${n} of ${events} events of ${runId}`);
    };
    const read = {
      one: (runId) => streamPage(one, runId, 100).then((n) => check(n, '1 stream', runId)),
      sharded: (runId) => streamPage(sharded, runId, 100).then((n) => check(n, `${shards} streams`, runId)),
      archived: (runId) => archivePage(db, runId, 100).then((n) => check(n, 'archive', runId)),
    };
    const samples = { one: [], sharded: [], shardedOfArchived: [], archived: [] };
    const timed = async (side, key, runId) => {
      const t = nowMs();
      await read[side](runId);
      samples[key].push(nowMs() - t);
    };
    // A short warm-up of each (connections, JIT), not counted.
    for (const side of Object.keys(read)) for (let i = 0; i < 20; i++) await read[side](runIdOf(i));
    const perRound = Math.ceil(reads / rounds);
    for (let round = 0; round < rounds; round++) {
      log(`event-scale: reading round ${round + 1} of ${rounds}…`);
      const ids = Array.from({ length: perRound }, () => runIdOf(Math.floor(Math.random() * runs)));
      for (const runId of ids) await timed('one', 'one', runId);
      for (const runId of ids) await timed('sharded', 'sharded', runId);
      // The archive against the same archived runs read from the N streams (they are there too).
      const archivedIds = Array.from({ length: perRound }, () => runIdOf(Math.floor(Math.random() * archived)));
      for (const runId of archivedIds) await timed('sharded', 'shardedOfArchived', runId);
      for (const runId of archivedIds) await timed('archived', 'archived', runId);
    }
    const bytesOf = async (side) => {
      let bytes = 0;
      for (const name of side.layout.streams) bytes += (await side.jsm.streams.info(name)).state.bytes;
      return bytes;
    };
    const memory = {
      one: { rss: residentMemory(one.server.pid)?.rss, store: await bytesOf(one) },
      sharded: { rss: residentMemory(sharded.server.pid)?.rss, store: await bytesOf(sharded) },
    };
    log('event-scale: restarting each server after a SIGKILL…');
    const restart = {
      one: await restartSeconds(one, join(dir, 'one')),
      sharded: await restartSeconds(sharded, join(dir, 'sharded')),
    };
    await db.dropDatabase();
    return {
      runs,
      archivedRuns: archived,
      events,
      live,
      shards,
      reads: perRound * rounds,
      rounds,
      seed: { oneMs: seedOneMs, shardedMs: seedShardedMs, archiveMs: seedArchiveMs },
      one: stats(samples.one),
      sharded: stats(samples.sharded),
      archived: stats(samples.archived),
      shardedOfArchived: stats(samples.shardedOfArchived),
      memory,
      restart,
    };
  } finally {
    await mongo?.close();
    for (const side of sides) {
      await side.nc.close().catch(() => undefined);
      await side.server.stop().catch(() => undefined);
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Rows of the summary table (benchmark 11): each side's p50 and p99 against its baseline. */
export function eventScaleRows(r) {
  if (!r) return [];
  const what = `one run's page (${r.events} events), ${int(r.runs)} runs in the log`;
  const row = (name, ours, baseline, key) =>
    summaryRow(
      11,
      `${what}: ${name}, ${key}`,
      `${ms(ours[key])} ms`,
      `${ms(baseline[key])} ms`,
      ours[key] / baseline[key],
    );
  return [
    row(`${r.shards} streams vs 1 stream`, r.sharded, r.one, 'p50'),
    row(`${r.shards} streams vs 1 stream`, r.sharded, r.one, 'p99'),
    row(
      `archived in FerretDB (${int(r.archivedRuns)} runs archived) vs ${r.shards} streams`,
      r.archived,
      r.shardedOfArchived,
      'p50',
    ),
    row(
      `archived in FerretDB (${int(r.archivedRuns)} runs archived) vs ${r.shards} streams`,
      r.archived,
      r.shardedOfArchived,
      'p99',
    ),
  ];
}

/** The details of benchmark 11. */
export function eventScaleTables(r) {
  if (!r) return [];
  const side = (name, s, m, restart) => [
    name,
    ms(s.p50),
    ms(s.p99),
    ms(s.mean),
    m ? mib(m.rss) : '—',
    m ? mib(m.store) : '—',
    restart === undefined ? '—' : restart.toFixed(1),
  ];
  return [
    table(
      [
        'where the run is read',
        'p50 ms',
        'p99 ms',
        'mean ms',
        'nats-server RSS MiB after reads',
        'stream bytes MiB',
        'restart after SIGKILL s',
      ],
      [
        side('1 stream (RUN_EVENTS)', r.one, r.memory.one, r.restart.one),
        side(`${r.shards} streams by run id`, r.sharded, r.memory.sharded, r.restart.sharded),
        side(`${r.shards} streams, the archived runs`, r.shardedOfArchived),
        side(`archive (FerretDB, ${int(r.archivedRuns)} runs): record + chunks by _id`, r.archived),
      ],
    ),
    `Benchmark 11: ${int(r.runs)} runs × ${r.events} events written ${int(r.live)} runs at a time (events interleaved), ` +
      `${int(r.reads)} pages of random runs per side in ${r.rounds} alternating rounds (the archive side: random runs ` +
      `of the ${int(r.archivedRuns)} archived, against the same runs from the ${r.shards} streams). Seeding: 1 stream ` +
      `${(r.seed.oneMs / 1000).toFixed(0)} s, ${r.shards} streams ${(r.seed.shardedMs / 1000).toFixed(0)} s, ` +
      `archive ${(r.seed.archiveMs / 1000).toFixed(0)} s.`,
  ];
}
