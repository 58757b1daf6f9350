import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';
import type { LoggedEvent } from '../domain/event-page.js';

// The archive of run event logs: a finished run's events, copied out of its stream after the
// archive window (flows/archive.ts) so the stream can drop the run's subject. An archived event
// keeps its stream sequence, so pages read here have the same sequences and cursors.

/** One archived event; the chunk is kept as JSON text: it may hold keys MongoDB (or FerretDB) cannot store. */
export interface ArchivedEvent {
  /** Its stream sequence. */
  s: number;
  /** `chunk`, as JSON. */
  c: string;
  /** `created_at`, as the log had it. */
  t: string;
}

/**
 * Consecutive events of one run. `_id` is `<run>:<first sequence>`, and chunks are cut the same
 * way from the same log, so archivers copying a run at once write the same documents and the
 * second insert of each is a no-op.
 */
export interface EventChunkDoc {
  _id: string;
  run_id: string;
  first: number;
  last: number;
  events: ArchivedEvent[];
}

/**
 * Written (insert-once) only after a run's copy was read back and found equal to its log, and
 * before anything is purged: readers serve an archived run from here once it exists.
 */
export interface ArchiveMarkerDoc {
  /** The run id. */
  _id: string;
  /** The last archived event's sequence (0: the log was empty); later events stay in the stream. */
  last_sequence: number;
  events: number;
  archived_at: Date;
  purged_at: Date | null;
}

/** Events per chunk, and JSON bytes per chunk: a run of a few hundred events fits one or two. */
const CHUNK_EVENTS = 200;
const CHUNK_BYTES = 512 * 1024;

export interface EventArchive {
  chunks: Collection<EventChunkDoc>;
  markers: Collection<ArchiveMarkerDoc>;
  marker(runId: string): Promise<ArchiveMarkerDoc | null>;
  /** Stores the events (in sequence order) as chunks; chunks already stored are left as they are. */
  write(runId: string, events: readonly LoggedEvent[]): Promise<void>;
  /** Every archived event of the run, in order, each once. */
  readAll(runId: string): Promise<LoggedEvent[]>;
  /**
   * Archived events with `from` ≤ sequence ≤ `through`, at most `limit` and about `maxBytes` of
   * JSON (a page stops once it has passed the budget); `more` when archived events up to `through`
   * follow the page.
   */
  read(
    runId: string,
    from: number,
    through: number,
    limit: number,
    maxBytes: number,
  ): Promise<{ events: LoggedEvent[]; more: boolean }>;
  /** Records the archive as complete; a second record (another archiver) keeps the first. */
  insertMarker(doc: ArchiveMarkerDoc): Promise<void>;
  notePurged(runId: string, at: Date): Promise<void>;
  ensureIndexes(): Promise<void>;
}

const toLogged = (e: ArchivedEvent): LoggedEvent => ({
  sequence: e.s,
  chunk: JSON.parse(e.c) as unknown,
  created_at: e.t,
  pending: -1,
});

const eventBytes = (e: ArchivedEvent) => e.c.length + e.t.length + 48;

export function createEventArchive(db: Db): EventArchive {
  const chunks = db.collection<EventChunkDoc>('run_event_chunks');
  const markers = db.collection<ArchiveMarkerDoc>('run_event_archives');

  return {
    chunks,
    markers,
    marker: (runId) => mongoCall(() => markers.findOne({ _id: runId })),

    async write(runId, events) {
      let current: ArchivedEvent[] = [];
      let bytes = 0;
      const docs: EventChunkDoc[] = [];
      const cut = () => {
        if (current.length === 0) return;
        const first = current[0]!.s;
        docs.push({ _id: `${runId}:${first}`, run_id: runId, first, last: current.at(-1)!.s, events: current });
        current = [];
        bytes = 0;
      };
      for (const event of events) {
        const archived = { s: event.sequence, c: JSON.stringify(event.chunk ?? null), t: event.created_at };
        if (current.length >= CHUNK_EVENTS || (current.length > 0 && bytes + eventBytes(archived) > CHUNK_BYTES)) cut();
        current.push(archived);
        bytes += eventBytes(archived);
      }
      cut();
      for (const doc of docs) {
        try {
          await mongoCall(() => chunks.insertOne(doc));
        } catch (err) {
          if (!isDuplicateKeyError(err)) throw err;
        }
      }
    },

    async readAll(runId) {
      const docs = await mongoCall(() => chunks.find({ run_id: runId }).sort({ last: 1 }).toArray());
      const events: LoggedEvent[] = [];
      for (const doc of docs) {
        for (const e of doc.events) if (e.s > (events.at(-1)?.sequence ?? 0)) events.push(toLogged(e));
      }
      return events;
    },

    async read(runId, from, through, limit, maxBytes) {
      const events: LoggedEvent[] = [];
      let bytes = 0;
      // Chunks do not overlap (those of two archivers that saw different logs may: an event is
      // then taken once, from the first chunk holding it), so ordering by `last` is log order.
      const cursor = chunks
        .find({ run_id: runId, last: { $gte: from } })
        .sort({ last: 1 })
        .batchSize(4);
      try {
        for (;;) {
          const doc = await mongoCall(() => cursor.next());
          if (!doc) return { events, more: false };
          for (const e of doc.events) {
            if (e.s < from || e.s <= (events.at(-1)?.sequence ?? 0)) continue;
            if (e.s > through) return { events, more: false };
            if (events.length >= limit || bytes > maxBytes) return { events, more: true };
            events.push(toLogged(e));
            bytes += eventBytes(e);
          }
        }
      } finally {
        await cursor.close().catch(() => undefined);
      }
    },

    async insertMarker(doc) {
      try {
        await mongoCall(() => markers.insertOne(doc));
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
    },

    async notePurged(runId, at) {
      await mongoCall(() => markers.updateOne({ _id: runId }, { $set: { purged_at: at } }));
    },

    async ensureIndexes() {
      // run_event_archives is read by `_id` (run id) only: the default index serves it.
      await ensureIndexes(chunks, [
        {
          key: { run_id: 1, last: 1 },
          options: { name: 'run_last' },
          serves: 'a page of an archived run: its chunks ending at or after `from`, in log order',
        },
      ]);
    },
  };
}
