import { isDuplicateKeyError, mongoCall, unavailable, type Collection, type Db } from '@threadwork/platform';
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
  /**
   * The run's chunks in log order (their `_id` is `<run>:<first>`): a page finds the chunks it
   * needs here and reads them by `_id`: an index lookup whatever the archive's size (on the local
   * stack's FerretDB too, built with a patch for it: README.md, "Local infrastructure").
   */
  chunks: ChunkRange[];
  archived_at: Date;
  purged_at: Date | null;
}

export interface ChunkRange {
  first: number;
  last: number;
}

const chunkId = (runId: string, first: number) => `${runId}:${first}`;

/** Events per chunk, and JSON bytes per chunk: a run of a few hundred events fits one or two. */
const CHUNK_EVENTS = 200;
const CHUNK_BYTES = 512 * 1024;

/**
 * Cuts a run's events, fed in sequence order, into chunks: the same cuts from the same log
 * whatever pages it was read in, so archivers copying a run at once make the same documents.
 * Holds one chunk at a time.
 */
export class EventChunker {
  private current: ArchivedEvent[] = [];
  private bytes = 0;
  constructor(private readonly runId: string) {}

  /** Adds an event; returns the chunk it closed, if any. */
  push(event: LoggedEvent): EventChunkDoc | null {
    const archived = { s: event.sequence, c: JSON.stringify(event.chunk ?? null), t: event.created_at };
    const full =
      this.current.length >= CHUNK_EVENTS ||
      (this.current.length > 0 && this.bytes + eventBytes(archived) > CHUNK_BYTES);
    const closed = full ? this.flush() : null;
    this.current.push(archived);
    this.bytes += eventBytes(archived);
    return closed;
  }

  /** The chunk being filled, closed (null when empty). */
  flush(): EventChunkDoc | null {
    if (this.current.length === 0) return null;
    const events = this.current;
    const first = events[0]!.s;
    this.current = [];
    this.bytes = 0;
    return { _id: chunkId(this.runId, first), run_id: this.runId, first, last: events.at(-1)!.s, events };
  }
}

const sameEvents = (a: readonly ArchivedEvent[], b: readonly ArchivedEvent[]) =>
  a.length === b.length && a.every((e, i) => e.s === b[i]!.s && e.c === b[i]!.c && e.t === b[i]!.t);

export interface EventArchive {
  chunks: Collection<EventChunkDoc>;
  markers: Collection<ArchiveMarkerDoc>;
  marker(runId: string): Promise<ArchiveMarkerDoc | null>;
  /**
   * Stores the events (in sequence order) as chunks; a chunk already stored (by another archiver)
   * is left as it is, unless `replace`. Returns the chunks' ranges.
   */
  write(runId: string, events: readonly LoggedEvent[], opts?: { replace?: boolean }): Promise<ChunkRange[]>;
  /**
   * Stores one chunk and reads it back: true when the archive now holds exactly it. A chunk stored
   * before (another archiver's) is kept when equal, and replaced when it holds a prefix of this one
   * (an archiver that stopped before its record read the log before an event came); anything else
   * is false, and the run is not to be recorded.
   */
  storeChunk(doc: EventChunkDoc): Promise<boolean>;
  /** The events the chunks hold, in order, each once (what was stored, to compare with the log). */
  readChunks(runId: string, ranges: readonly ChunkRange[]): Promise<LoggedEvent[]>;
  /**
   * Archived events with sequence ≥ `from` (up to the marker's last), at most `limit` and about
   * `maxBytes` of JSON (a page stops once it has passed the budget); `more` when archived events
   * follow the page.
   */
  read(
    marker: ArchiveMarkerDoc,
    from: number,
    limit: number,
    maxBytes: number,
  ): Promise<{ events: LoggedEvent[]; more: boolean }>;
  /** Records the archive as complete; a second record (another archiver) keeps the first. */
  insertMarker(doc: ArchiveMarkerDoc): Promise<void>;
  notePurged(runId: string, at: Date): Promise<void>;
}

const toLogged = (e: ArchivedEvent): LoggedEvent => ({
  sequence: e.s,
  chunk: JSON.parse(e.c) as unknown,
  created_at: e.t,
  pending: -1,
});

const eventBytes = (e: ArchivedEvent) => e.c.length + e.t.length + 48;

/**
 * Both collections are read by `_id` only (a run's marker by run id, its chunks by the ids the
 * marker lists): the default index serves them; `run_id` on a chunk is for people.
 */
export function createEventArchive(db: Db): EventArchive {
  const chunks = db.collection<EventChunkDoc>('run_event_chunks');
  const markers = db.collection<ArchiveMarkerDoc>('run_event_archives');

  return {
    chunks,
    markers,
    marker: (runId) => mongoCall(() => markers.findOne({ _id: runId })),

    async write(runId, events, { replace = false } = {}) {
      const chunker = new EventChunker(runId);
      const docs: EventChunkDoc[] = [];
      for (const event of events) {
        const closed = chunker.push(event);
        if (closed) docs.push(closed);
      }
      const last = chunker.flush();
      if (last) docs.push(last);
      for (const doc of docs) {
        if (replace) {
          await mongoCall(() => chunks.replaceOne({ _id: doc._id }, doc, { upsert: true }));
          continue;
        }
        try {
          await mongoCall(() => chunks.insertOne(doc));
        } catch (err) {
          if (!isDuplicateKeyError(err)) throw err;
        }
      }
      return docs.map(({ first, last }) => ({ first, last }));
    },

    async storeChunk(doc) {
      try {
        await mongoCall(() => chunks.insertOne(doc));
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
        const stored = await mongoCall(() => chunks.findOne({ _id: doc._id }));
        if (!stored) return false;
        if (!sameEvents(stored.events, doc.events)) {
          const prefix =
            stored.events.length < doc.events.length &&
            sameEvents(stored.events, doc.events.slice(0, stored.events.length));
          if (!prefix) return false;
          // Only the shorter copy it read is replaced: never one that grew meanwhile.
          await mongoCall(() => chunks.replaceOne({ _id: doc._id, last: stored.last }, doc));
        }
      }
      const now = await mongoCall(() => chunks.findOne({ _id: doc._id }));
      return now !== null && sameEvents(now.events, doc.events);
    },

    async readChunks(runId, ranges) {
      const events: LoggedEvent[] = [];
      for (const { first } of ranges) {
        const doc = await mongoCall(() => chunks.findOne({ _id: chunkId(runId, first) }));
        for (const e of doc?.events ?? []) if (e.s > (events.at(-1)?.sequence ?? 0)) events.push(toLogged(e));
      }
      return events;
    },

    async read(marker, from, limit, maxBytes) {
      const events: LoggedEvent[] = [];
      let bytes = 0;
      // The first chunk ending at or after `from` (chunks are in log order), then on until the page is full.
      let lo = 0;
      let hi = marker.chunks.length;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (marker.chunks[mid]!.last < from) lo = mid + 1;
        else hi = mid;
      }
      for (let i = lo; i < marker.chunks.length; i++) {
        const { first } = marker.chunks[i]!;
        const doc = await mongoCall(() => chunks.findOne({ _id: chunkId(marker._id, first) }));
        if (!doc) throw unavailable(`chunk ${first} of run ${marker._id}'s archived log is missing`);
        for (const e of doc.events) {
          // A chunk stored by another archiver that saw more of the log may hold events past the
          // marker's last: those are still in the stream, read from there.
          if (e.s < from || e.s <= (events.at(-1)?.sequence ?? 0)) continue;
          if (e.s > marker.last_sequence) return { events, more: false };
          if (events.length >= limit || bytes > maxBytes) return { events, more: true };
          events.push(toLogged(e));
          bytes += eventBytes(e);
        }
      }
      return { events, more: false };
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
  };
}
