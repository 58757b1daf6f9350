import { AppError } from '@threadwork/platform';
import type { LoggedEvent } from '../domain/event-page.js';
import { EventChunker, type ArchiveMarkerDoc, type ChunkRange, type EventChunkDoc } from '../store/event-archive.js';
import type { RunDoc } from '../store/runs.js';
import type { RunsContext } from './context.js';

// A finished run's log leaves its stream after the archive window (RUN_EVENTS_ARCHIVE_AFTER_MS):
// copy it to MongoDB a chunk at a time, each read back and compared, record the archive
// (insert-once), then purge the run's subject from the stream. Each step is idempotent, so any number of runs replicas may
// archive the same run at once, and a crash anywhere leaves a state the next pass finishes:
// - before the record: the stream still has every event and readers read it; the next pass copies
//   again (the same chunk documents, inserted once) and goes on;
// - after the record: readers read the archive; the next pass only purges.
// The purge removes only events up to the recorded last sequence, so an event appended after the
// copy stays in the stream, and a page of an archived run reads it there after the archive's end.

const READ_BATCH = 1000;
const SWEEP_BATCH = 100;

/**
 * Copies the run's log to the archive, checks the copy and records it; returns the record
 * (another archiver's, if it recorded first). The log is read a page at a time and stored a chunk
 * at a time, each read back and compared as it is stored, so an archiver holds one page and one
 * chunk of a log whatever its length.
 */
export async function copyToArchive(ctx: RunsContext, runId: string, at = new Date()): Promise<ArchiveMarkerDoc> {
  const existing = await ctx.archive.marker(runId);
  if (existing) return existing;
  const chunker = new EventChunker(runId);
  const chunks: ChunkRange[] = [];
  let events = 0;
  let last = 0;
  const store = async (doc: EventChunkDoc | null) => {
    if (!doc) return;
    if (!(await ctx.archive.storeChunk(doc))) {
      // Another archiver recorded the run meanwhile (its chunks are the ones to keep), or the copy
      // does not hold what the log does: either way, nothing of this copy is recorded.
      const recorded = await ctx.archive.marker(runId);
      if (recorded) throw new RecordedMeanwhile(recorded);
      throw new AppError('internal', `the archived copy of run ${runId}'s log differs from the log; not purging it`);
    }
    chunks.push({ first: doc.first, last: doc.last });
  };
  try {
    for (;;) {
      const batch = await ctx.log.read(runId, last + 1, READ_BATCH);
      for (const event of batch) {
        await store(chunker.push(event));
        events++;
        last = event.sequence;
      }
      if (batch.length === 0 || batch.at(-1)!.pending === 0) break;
    }
    await store(chunker.flush());
  } catch (err) {
    if (err instanceof RecordedMeanwhile) return err.marker;
    throw err;
  }
  await ctx.archive.insertMarker({
    _id: runId,
    last_sequence: last,
    events,
    chunks,
    archived_at: at,
    purged_at: null,
  });
  const marker = await ctx.archive.marker(runId);
  if (!marker) throw new AppError('internal', `the archive record of run ${runId} is missing after writing it`);
  return marker;
}

class RecordedMeanwhile extends Error {
  constructor(readonly marker: ArchiveMarkerDoc) {
    super(`run ${marker._id} was archived meanwhile`);
  }
}

/** Purges what the record says is archived from the stream, and marks the run archived. */
export async function purgeArchived(ctx: RunsContext, marker: ArchiveMarkerDoc, at = new Date()): Promise<void> {
  if (marker.last_sequence > 0) await ctx.log.purge(marker._id, marker.last_sequence + 1);
  if (!marker.purged_at) await ctx.archive.notePurged(marker._id, at);
  await ctx.store.setRun(marker._id, { events_archived_at: at });
}

/** Archives one ended run's log (or finishes archiving it). */
export async function archiveRun(ctx: RunsContext, runId: string, at = new Date()): Promise<ArchiveMarkerDoc> {
  const marker = await copyToArchive(ctx, runId, at);
  await purgeArchived(ctx, marker, at);
  return marker;
}

/** One pass of the archive sweep: the oldest runs that ended before the window; returns how many were archived. */
export async function archiveDueRuns(ctx: RunsContext, now = new Date()): Promise<number> {
  const cutoff = new Date(now.getTime() - ctx.config.RUN_EVENTS_ARCHIVE_AFTER_MS);
  const due = await ctx.store.runsToArchive(cutoff, SWEEP_BATCH, now);
  let archived = 0;
  for (const run of due) {
    if (!run.terminal) continue;
    try {
      await archiveRun(ctx, run._id, now);
      archived++;
    } catch (err) {
      // Tried again one archive window later: the sweep takes the oldest runs first, and a run
      // that cannot be archived now must not keep the others from their turn.
      const retryAt = new Date(now.getTime() + Math.max(ctx.config.RUN_EVENTS_ARCHIVE_AFTER_MS, 60_000));
      ctx.logger.warn(
        { err, run_id: run._id, retry_at: retryAt },
        'archiving a run event log failed; trying it again later',
      );
      await ctx.store.setRun(run._id, { events_archive_retry_at: retryAt }).catch(() => undefined);
    }
  }
  return archived;
}

/**
 * The run's events with sequence ≥ from, wherever they are. The archive record is written before
 * anything is purged, so a record not there after the stream was read means that read saw the
 * whole log; only a terminal run (or an empty page) can be archived, so only those look for one.
 */
export async function readRunEvents(
  ctx: RunsContext,
  run: RunDoc,
  from: number,
  limit: number,
): Promise<LoggedEvent[]> {
  if (run.events_archived_at) {
    const marker = await ctx.archive.marker(run._id);
    if (marker) return readArchived(ctx, marker, from, limit);
  }
  const events = await ctx.log.read(run._id, from, limit);
  if (!run.terminal && events.length > 0) return events;
  const marker = await ctx.archive.marker(run._id);
  return marker ? readArchived(ctx, marker, from, limit) : events;
}

/**
 * A page of an archived run: its archived events, or — past them — any the stream still holds (an
 * event appended after the copy). A page holds events of one place only, so it stays within the
 * reply's byte budget; `pending` of its last archived event says whether the log goes on.
 */
async function readArchived(
  ctx: RunsContext,
  marker: ArchiveMarkerDoc,
  from: number,
  limit: number,
): Promise<LoggedEvent[]> {
  const { events, more } = await ctx.archive.read(marker, from, limit, ctx.log.pageBytes());
  const last = events.at(-1);
  if (!last) return ctx.log.read(marker._id, Math.max(from, marker.last_sequence + 1), limit);
  if (more) {
    last.pending = 1;
  } else {
    const after = await ctx.log.read(marker._id, marker.last_sequence + 1, 1);
    last.pending = after.length > 0 ? Math.max(1, after[0]!.pending + 1) : 0;
  }
  return events;
}
