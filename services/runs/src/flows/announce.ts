import {
  domainEvents,
  type RunError,
  type RunStatus,
  type RunStatusChunk,
  type RunStatusEvent,
} from '@threadwork/contracts';
import { AppError, publishEvent, unavailable } from '@threadwork/platform';
import { MAX_ATOMIC_BATCH, type LogEntry } from '../store/event-log.js';
import type { RunDoc } from '../store/runs.js';
import { recordTransition } from '../metrics.js';
import { staleAttempt, type RunsContext } from './context.js';

// What the runs service tells of a run: the status events in its log and the DOMAIN events of its
// moves. Nothing goes into a run's log behind its terminal event.

export function statusChunk(
  status: RunStatus,
  previous: RunStatus | null,
  attempt: number,
  error: RunError | null,
): RunStatusChunk & { attempt: number } {
  return {
    type: 'run.status',
    status,
    ...(previous ? { previous } : {}),
    ...(error ? { error } : {}),
    attempt,
  };
}
export async function publishRunStatus(ctx: RunsContext, run: RunDoc, previous: RunStatus | null, msgId: string) {
  const event: RunStatusEvent = {
    run_id: run._id,
    thread_id: run.thread_id,
    owner_id: run.owner_id,
    status: run.status,
    previous,
    terminal: run.terminal,
    attempt: run.attempt,
    error: run.error,
    at: run.updated_at.toISOString(),
  };
  // Not published is `unavailable`: the caller's retry publishes it again (deduplicated).
  await publishEvent(ctx.js, domainEvents.runStatus, event, { msgId });
  recordTransition(run.status, run.terminal, run.created_at, run.updated_at);
}

const ANNOUNCE_TRIES = 10;

/**
 * Appends the `run.status` event of the run's last move and publishes its DOMAIN event, both
 * keyed by the move: running it again (a retry that finds the move made) stores nothing twice.
 *
 * Never behind a terminal event: a terminal decision can be made between a move's own look for
 * one and its append (a runner's completion racing a user's cancel), and its event must stay the
 * log's last. So the append is conditional on the log still ending where it did when no decision
 * was found; if anything came first, look again. A move that lost to a terminal decision announces
 * nothing: the run has ended, and its terminal event says how.
 */
export async function announceMove(ctx: RunsContext, run: RunDoc): Promise<void> {
  const entry = { key: run.status_key, chunk: statusChunk(run.status, run.previous_status, run.attempt, run.error) };
  for (let i = 0; ; i++) {
    const last = await ctx.log.lastSequence(run._id);
    if (await ctx.store.terminal(run._id)) return;
    if ((await ctx.log.appendAfter(run._id, last, entry)) !== null) break;
    // Another event came first (most often the runner's own output): look again.
    if (i + 1 >= ANNOUNCE_TRIES) throw unavailable(`the log of run ${run._id} kept moving; try again`);
  }
  await publishRunStatus(ctx, run, run.previous_status, `${run._id}:${run.status_key}`);
}

const APPEND_TRIES = 10;

/**
 * Appends events to a live run's log in order, none of them behind the run's terminal event.
 *
 * First the log's end is read, then the run is checked for a terminal decision, then the events
 * go in as one atomic batch conditional on the log still ending there (JetStream's expected last
 * subject sequence, checked for the batch as a whole): all of them behind that end, at consecutive
 * sequences, or none. A terminal event that landed meanwhile fails the condition, and nothing of
 * the batch is stored. One round trip for the batch.
 *
 * When the batch is not stored, the events go one at a time, each conditional on the log's end as
 * last seen: a retry of events stored before is answered with their original sequences (which a
 * batch cannot tell), anything else that came first (a status move, another batch) means reading
 * the end again, and a terminal event refuses the rest (`already_settled`) while what went in
 * before stays.
 */
export async function appendWhileLive(
  ctx: RunsContext,
  runId: string,
  entries: readonly LogEntry[],
  opts: { attempt?: number; last?: number } = {},
): Promise<number[]> {
  const sequences: number[] = [];
  const stillLive = () => checkLive(ctx, runId, opts.attempt);
  for (let i = 0; i < entries.length; i += MAX_ATOMIC_BATCH) {
    const chunk = entries.slice(i, i + MAX_ATOMIC_BATCH);
    // `opts.last`: the log's end as the caller has just read it, for the first batch.
    const last = i === 0 && opts.last !== undefined ? opts.last : await ctx.log.lastSequence(runId);
    await stillLive();
    const stored = await ctx.log.appendBatchAfter(runId, last, chunk);
    sequences.push(...(stored ?? (await appendOneByOne(ctx, runId, chunk, stillLive))));
  }
  return sequences;
}

/**
 * Refuses (`already_settled`) a run whose end was decided, and, for a runner's events, a run that
 * a newer attempt took over: read after the log's end, so nothing checked against that end can
 * land behind the new attempt's events.
 */
async function checkLive(ctx: RunsContext, runId: string, attempt: number | undefined): Promise<void> {
  const [terminal, run] = await Promise.all([
    ctx.store.terminal(runId),
    attempt === undefined ? null : ctx.store.run(runId),
  ]);
  if (terminal) throw new AppError('already_settled', `run ${runId} has ended`);
  if (run && run.attempt !== attempt) throw staleAttempt(run, attempt!);
}

async function appendOneByOne(
  ctx: RunsContext,
  runId: string,
  entries: readonly LogEntry[],
  stillLive: () => Promise<void>,
): Promise<number[]> {
  const sequences: number[] = [];
  let last: number | null = null;
  for (const entry of entries) {
    for (let attempt = 0; ; attempt++) {
      if (last === null) {
        last = await ctx.log.lastSequence(runId);
        await stillLive();
      }
      const sequence = await ctx.log.appendAfter(runId, last, entry);
      if (sequence !== null) {
        sequences.push(sequence);
        // A repeat of an event already stored answers with its old sequence: read the end again.
        last = sequence > last ? sequence : null;
        break;
      }
      last = null;
      if (attempt + 1 >= APPEND_TRIES) throw unavailable(`the log of run ${runId} kept moving; try again`);
    }
  }
  return sequences;
}
