import type { RunError, RunUsage, TerminalRunStatus } from '@threadwork/contracts';
import { isDuplicateKeyError } from '@threadwork/platform';
import type { LogEntry } from '../store/event-log.js';
import type { InteractionDoc, SettlementDoc } from '../store/interactions.js';
import type { RunDoc, TerminalDoc } from '../store/runs.js';
import { publishRunStatus, statusChunk } from './announce.js';
import type { RunsContext } from './context.js';

// How a run ends: decided once by the first insert into run_terminals, then finished in a fixed
// order by whoever finds the decision (its maker, a racing move, a later claim).

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
    announced: false,
  };
  try {
    await ctx.store.decideTerminal(decided);
    return await completeTerminal(ctx, run, decided);
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    const [winner, current] = await Promise.all([ctx.store.terminal(run._id), ctx.store.run(run._id)]);
    if (!winner || !current) throw err;
    return current.terminal ? current : completeTerminal(ctx, current, winner);
  }
}

/**
 * Finishes a terminal decision found after the fact (a crash, or a write that raced it), down to
 * its DOMAIN event: one whose publish failed after the run said terminal goes out on the retry
 * that brings the caller here (the runner's move, a redelivered job's claim, the user's cancel).
 * `read` is the run's decision (null: none) when the caller read it beside the run.
 */
export async function settleIfTerminal(
  ctx: RunsContext,
  run: RunDoc,
  read?: TerminalDoc | null,
): Promise<RunDoc | null> {
  const decided = read === undefined ? await ctx.store.terminal(run._id) : read;
  if (!decided) return null;
  if (!run.terminal || run.status !== decided.status) return completeTerminal(ctx, run, decided);
  if (decided.announced === false) await announceTerminal(ctx, run, decided);
  return run;
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
    await ctx.store.noteTerminalEvent(run._id, sequence ?? null);
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
  await ctx.store.setRun(run._id, final);
  const done: RunDoc = { ...run, ...final };
  await announceTerminal(ctx, done, decided);
  return done;
}

/** Publishes the run's terminal DOMAIN event (deduplicated by the decision), then notes it went out. */
async function announceTerminal(ctx: RunsContext, done: RunDoc, decided: TerminalDoc): Promise<void> {
  await publishRunStatus(ctx, done, decided.previous, `${done._id}:${decided.status}:${decided.attempt}`);
  await ctx.store.noteTerminalAnnounced(done._id);
}

/**
 * A run that ended leaves no question open: each pending interaction is settled `cancelled` by
 * the system — unless the user's answer wins the same settlement insert.
 */
async function cancelPendingInteractions(ctx: RunsContext, runId: string): Promise<void> {
  const pending = await ctx.interactions.pendingOfRun(runId);
  for (const doc of pending) {
    const settlement: SettlementDoc = {
      _id: doc._id,
      status: 'cancelled',
      answers: {},
      cancelled_by: 'system',
      resolved_at: new Date(),
    };
    try {
      await ctx.interactions.insertSettlement(settlement);
      await applySettlement(ctx, doc, settlement);
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
      const winner = await ctx.interactions.settlement(doc._id);
      if (winner) await applySettlement(ctx, doc, winner);
    }
  }
}

/** The log's pointer at a question or plan approval (never the questions themselves). */
export function requestedEntry(doc: InteractionDoc): LogEntry {
  return {
    key: `interaction:${doc._id}:requested`,
    chunk: { type: 'interaction.requested', interaction_id: doc._id, kind: doc.kind },
  };
}

/**
 * Logs a settlement, then copies it into its interaction; the log never carries the answers. In
 * this order: the runner takes the answers once the interaction says it is settled, and what the
 * agent does with them must come after `interaction.settled` in the run's log. A copy that fails
 * after the log is done again by the next reader of the settlement (readSettlement), the event
 * being keyed.
 *
 * An interaction is readable (and answerable) from its insert, a moment before the runs service
 * logs its request: a settlement in that moment logs the request first, keyed as the raiser's own
 * append is, so the log never settles what it has not asked and asks it once.
 */
export async function applySettlement(ctx: RunsContext, doc: InteractionDoc, s: SettlementDoc): Promise<void> {
  const current = doc.announced === false ? ((await ctx.interactions.interaction(doc._id)) ?? doc) : doc;
  const settled: LogEntry = {
    key: `interaction:${doc._id}:settled`,
    chunk: { type: 'interaction.settled', interaction_id: doc._id, status: s.status },
  };
  if (current.announced === false) {
    await ctx.log.append(doc.run_id, [requestedEntry(doc), settled]);
    await ctx.interactions.markAnnounced(doc._id);
  } else {
    await ctx.log.append(doc.run_id, [settled]);
  }
  await ctx.interactions.applySettlement(s);
}
