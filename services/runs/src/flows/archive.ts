import { AppError } from '@threadwork/platform';
import type { LoggedEvent } from '../domain/event-page.js';
import type { ArchiveMarkerDoc, ChunkRange } from '../store/event-archive.js';
import type { RunDoc } from '../store/runs.js';
import type { RunsContext } from './context.js';

// A finished run's log leaves its stream after the archive window (RUN_EVENTS_ARCHIVE_AFTER_MS):
// copy it to MongoDB, read the copy back and compare, record the archive (insert-once), then purge
// the run's subject from the stream. Each step is idempotent, so any number of runs replicas may
// archive the same run at once, and a crash anywhere leaves a state the next pass finishes:
// - before the record: the stream still has every event and readers read it; the next pass copies
//   again (the same chunk documents, inserted once) and goes on;
// - after the record: readers read the archive; the next pass only purges.
// The purge removes only events up to the recorded last sequence, so an event appended after the
// copy stays in the stream, and a page of an archived run reads it there after the archive's end.

const READ_BATCH = 1000;
const SWEEP_BATCH = 100;

/** Copies the run's log to the archive, checks the copy and records it; returns the record (another archiver's, if it recorded first). */
export async function copyToArchive(ctx: RunsContext, runId: string, at = new Date()): Promise<ArchiveMarkerDoc> {
  const existing = await ctx.archive.marker(runId);
  if (existing) return existing;
  const logged: LoggedEvent[] = [];
  for (;;) {
    const from = (logged.at(-1)?.sequence ?? 0) + 1;
    const batch = await ctx.log.read(runId, from, READ_BATCH);
    logged.push(...batch);
    if (batch.length === 0 || batch.at(-1)!.pending === 0) break;
  }
  const last = logged.at(-1)?.sequence ?? 0;
  const copiedAsLogged = async (ranges: ChunkRange[]) => {
    const copied = (await ctx.archive.readChunks(runId, ranges)).filter((e) => e.sequence <= last);
    return (
      copied.length === logged.length &&
      copied.every(
        (e, i) =>
          e.sequence === logged[i]!.sequence &&
          e.created_at === logged[i]!.created_at &&
          JSON.stringify(e.chunk) === JSON.stringify(logged[i]!.chunk ?? null),
      )
    );
  };
  let chunks = await ctx.archive.write(runId, logged);
  if (!(await copiedAsLogged(chunks))) {
    // A chunk stored by an archiver that stopped before its record may hold less of the log than
    // this one read (an event came after its copy): nothing reads chunks without a record, and a
    // chunk only ever grows at its end, so it is written again with what this one read.
    chunks = await ctx.archive.write(runId, logged, { replace: true });
    if (!(await copiedAsLogged(chunks))) {
      throw new AppError('internal', `the archived copy of run ${runId}'s log differs from the log; not purging it`);
    }
  }
  await ctx.archive.insertMarker({
    _id: runId,
    last_sequence: last,
    events: logged.length,
    chunks,
    archived_at: at,
    purged_at: null,
  });
  const marker = await ctx.archive.marker(runId);
  if (!marker) throw new AppError('internal', `the archive record of run ${runId} is missing after writing it`);
  return marker;
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
