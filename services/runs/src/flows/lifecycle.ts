import {
  domainEvents,
  subjects,
  type RunError,
  type RunStatus,
  type RunStatusChunk,
  type RunStatusEvent,
  type RunUsage,
  type TerminalRunStatus,
} from '@threadwork/contracts';
import { AppError, isDuplicateKeyError, publishSignal, unavailable } from '@threadwork/platform';
import { isHeldByRunner } from '../domain/run-state.js';
import { publishDomain, type LogEntry } from '../store/event-log.js';
import type { InteractionDoc, SettlementDoc } from '../store/interactions.js';
import type { RunDoc, TerminalDoc } from '../store/runs.js';
import { recordTransition } from '../metrics.js';
import type { RunsContext } from './context.js';

// How a run moves once a move is known to be allowed (domain/run-state.ts decides that).
//
// Non-terminal moves are conditional updates on (run, attempt, status): DESIGN.md allows those for
// decisions where a rare double success is harmless. Terminal moves are decided by inserting into
// run_terminals (first insert wins) and then finished in a fixed order. Because FerretDB writes
// whole documents, a concurrent move can overwrite the run document; every move therefore looks
// for a terminal decision and a cancel request after its write and converges on them.

export interface MoveOptions {
  sandbox_id?: string | undefined;
  usage?: RunUsage | undefined;
  /** A claim moves the run to a new attempt together with `starting`. */
  attempt?: number;
  runner_id?: string;
  /**
   * Names a move the runs service makes itself for a known reason (a claim, an interaction), so
   * that two services finishing the same work emit one status event. Runner moves are keyed by
   * the run's move count instead.
   */
  cause?: string;
}

const domainSubject = () =>
  subjects.domain(domainEvents.runStatus.service, domainEvents.runStatus.entity, domainEvents.runStatus.verb);

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

async function publishRunStatus(ctx: RunsContext, run: RunDoc, previous: RunStatus | null, msgId: string) {
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
  await publishDomain(ctx.js, domainSubject(), event, msgId);
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
    if (await ctx.store.terminals.findOne({ _id: run._id })) return;
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
 * Each event is conditional on the log still ending where it was last seen (JetStream's expected
 * last subject sequence): first the log's end is read, then the run is checked for a terminal
 * decision, then the event goes in only if nothing came after that end. A terminal event that
 * lands meanwhile makes the next append fail its condition; the run is then checked again and
 * the rest is refused (`already_settled`), while what went in before stays. Anything else that
 * came first (a status move, another batch) just means reading the end again. One round trip per
 * event: pipelining would let a terminal event land in the middle of a batch.
 */
export async function appendWhileLive(
  ctx: RunsContext,
  runId: string,
  entries: readonly LogEntry[],
): Promise<number[]> {
  const sequences: number[] = [];
  let last: number | null = null;
  for (const entry of entries) {
    for (let attempt = 0; ; attempt++) {
      if (last === null) {
        last = await ctx.log.lastSequence(runId);
        if (await ctx.store.terminals.findOne({ _id: runId })) {
          throw new AppError('already_settled', `run ${runId} has ended`);
        }
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

/**
 * Moves a live run to a non-terminal `to` if it is still in `run.status` at `run.attempt`. Returns
 * the run after the move (which may be terminal or `cancelling` if those were decided meanwhile),
 * or null when the run had moved on, so the caller decides again on a fresh read.
 */
export async function moveRun(
  ctx: RunsContext,
  run: RunDoc,
  to: RunStatus,
  opts: MoveOptions = {},
): Promise<RunDoc | null> {
  const now = new Date();
  const attempt = opts.attempt ?? run.attempt;
  const transitions = run.transitions + 1;
  const statusKey = `status:${attempt}:${opts.cause ?? transitions}:${to}`;
  const after = await ctx.store.runs.findOneAndUpdate(
    { _id: run._id, attempt: run.attempt, status: run.status, terminal: false },
    {
      $set: {
        status: to,
        previous_status: run.status,
        status_key: statusKey,
        transitions,
        attempt,
        updated_at: now,
        ...(to === 'running' && !run.started_at ? { started_at: now } : {}),
        ...(opts.sandbox_id ? { sandbox_id: opts.sandbox_id } : {}),
        ...(opts.usage ? { usage: opts.usage } : {}),
        ...(opts.runner_id ? { runner_id: opts.runner_id } : {}),
      },
    },
    { returnDocument: 'after' },
  );
  if (!after) return null;

  const terminal = await settleIfTerminal(ctx, after);
  if (terminal) return terminal;
  await announceMove(ctx, after);

  // A cancel request written while this move raced it must not be lost to the move's write.
  if (to !== 'cancelling' && isHeldByRunner(to) && (await ctx.store.cancels.findOne({ _id: run._id }))) {
    return (await enterCancelling(ctx, after)) ?? after;
  }
  return after;
}

/** Moves a runner-held run to `cancelling`, then tells its runner (after the write, as DESIGN.md asks). */
export async function enterCancelling(ctx: RunsContext, run: RunDoc): Promise<RunDoc | null> {
  const after = await moveRun(ctx, run, 'cancelling', { cause: 'cancel' });
  if (after && !after.terminal) signalCancel(ctx, run._id);
  return after;
}

export function signalCancel(ctx: RunsContext, runId: string): void {
  publishSignal(ctx.nc, subjects.runSignal(runId), { type: 'cancel' });
}

export interface FinishOptions {
  error?: RunError | undefined;
  usage?: RunUsage | undefined;
}

/**
 * Ends a run exactly once: the first insert into run_terminals decides the outcome. The winner
 * finishes the follow-up writes; a loser gets the run as it stands (finishing the winner's
 * follow-ups first if the winner has not got that far, which writes nothing twice).
 */
export async function finishRun(
  ctx: RunsContext,
  run: RunDoc,
  to: TerminalRunStatus,
  opts: FinishOptions = {},
): Promise<RunDoc> {
  const decided: TerminalDoc = {
    _id: run._id,
    status: to,
    previous: run.status,
    error: opts.error ?? null,
    usage: opts.usage ?? run.usage,
    attempt: run.attempt,
    at: new Date(),
    event_sequence: null,
  };
  try {
    await ctx.store.terminals.insertOne(decided);
    return await completeTerminal(ctx, run, decided);
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    const [winner, current] = await Promise.all([
      ctx.store.terminals.findOne({ _id: run._id }),
      ctx.store.runs.findOne({ _id: run._id }),
    ]);
    if (!winner || !current) throw err;
    return current.terminal ? current : completeTerminal(ctx, current, winner);
  }
}

/** Finishes a terminal decision found after the fact (a crash, or a write that raced it). */
export async function settleIfTerminal(ctx: RunsContext, run: RunDoc): Promise<RunDoc | null> {
  const decided = await ctx.store.terminals.findOne({ _id: run._id });
  if (!decided) return null;
  if (run.terminal && run.status === decided.status) return run;
  return completeTerminal(ctx, run, decided);
}

/**
 * The follow-up writes of a terminal decision, in an order that makes each reader safe: pending
 * interactions are settled first (so the terminal event is the log's last status event); the
 * terminal event is appended before the run document says terminal (an event page that reads the
 * run first and sees it terminal is sure to find the terminal event in the log), which also frees
 * the thread's slot (the next admission takes the next generation); then the DOMAIN event tells
 * the thread it may start its next run. Every step is idempotent, so finishing twice (or concurrently) changes nothing.
 */
async function completeTerminal(ctx: RunsContext, run: RunDoc, decided: TerminalDoc): Promise<RunDoc> {
  await cancelPendingInteractions(ctx, run._id);
  if (decided.event_sequence === null) {
    const [sequence] = await ctx.log.append(run._id, [
      { key: 'terminal', chunk: statusChunk(decided.status, decided.previous, decided.attempt, decided.error) },
    ]);
    await ctx.store.terminals.updateOne({ _id: run._id }, { $set: { event_sequence: sequence ?? null } });
  }
  const final = {
    status: decided.status,
    previous_status: decided.previous,
    status_key: 'terminal',
    terminal: true,
    completed_at: decided.at,
    error: decided.error,
    usage: decided.usage,
    updated_at: decided.at,
  };
  await ctx.store.runs.updateOne({ _id: run._id }, { $set: final });
  const done: RunDoc = { ...run, ...final };
  await publishRunStatus(ctx, done, decided.previous, `${run._id}:${decided.status}:${decided.attempt}`);
  return done;
}

/**
 * A run that ended leaves no question open: each pending interaction is settled `cancelled` by
 * the system — unless the user's answer wins the same settlement insert.
 */
async function cancelPendingInteractions(ctx: RunsContext, runId: string): Promise<void> {
  const pending = await ctx.interactions.interactions.find({ run_id: runId, status: 'pending' }).toArray();
  for (const doc of pending) {
    const settlement: SettlementDoc = {
      _id: doc._id,
      status: 'cancelled',
      answers: {},
      cancelled_by: 'system',
      resolved_at: new Date(),
    };
    try {
      await ctx.interactions.settlements.insertOne(settlement);
      await applySettlement(ctx, doc, settlement);
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const winner = await ctx.interactions.settlements.findOne({ _id: doc._id });
      if (winner) await applySettlement(ctx, doc, winner);
    }
  }
}

/** Copies a settlement into its interaction and logs it; the log never carries the answers. */
export async function applySettlement(ctx: RunsContext, doc: InteractionDoc, s: SettlementDoc): Promise<void> {
  await ctx.interactions.interactions.updateOne(
    { _id: doc._id },
    { $set: { status: s.status, answers: s.answers, cancelled_by: s.cancelled_by, resolved_at: s.resolved_at } },
  );
  await ctx.log.append(doc.run_id, [
    {
      key: `interaction:${doc._id}:settled`,
      chunk: { type: 'interaction.settled', interaction_id: doc._id, status: s.status },
    },
  ]);
}
