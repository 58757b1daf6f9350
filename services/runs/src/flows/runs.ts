import type { RunEventPage } from '@threadwork/contracts';
import { unavailable } from '@threadwork/platform';
import { assemblePage } from '../domain/event-page.js';
import { readRunEvents } from './archive.js';
import type { RunDoc } from '../store/runs.js';
import { loadOwnedRun, type RunsContext } from './context.js';
import { finishRun, settleIfTerminal } from './finish.js';
import { enterCancelling, signalCancel } from './lifecycle.js';

// What callers acting for a user ask about runs: read them, page their events, cancel them.

const CANCEL_TRIES = 5;

/**
 * Cancels a run. A queued run (no runner has it) is cancelled at once; a run a runner holds moves
 * to `cancelling` and its runner is signalled, and the runner ends it; a run already cancelling
 * is signalled again (a runner that missed the signal also finds the state on its next look); a
 * terminal run is returned unchanged with `requested: false`.
 */
export async function cancelRun(
  ctx: RunsContext,
  ownerId: string,
  runId: string,
): Promise<{ run: RunDoc; requested: boolean }> {
  for (let i = 0; i < CANCEL_TRIES; i++) {
    let run = await loadOwnedRun(ctx, runId, ownerId);
    run = (await settleIfTerminal(ctx, run)) ?? run;
    if (run.terminal) return { run, requested: false };
    // Decided on a queued view: a runner that claimed the run meanwhile finds it cancelled on its
    // next move and stops.
    if (run.status === 'queued') return { run: await finishRun(ctx, run, 'cancelled'), requested: true };

    await ctx.store.requestCancel(run._id, new Date());
    if (run.status === 'cancelling') {
      signalCancel(ctx, run._id);
      return { run, requested: true };
    }
    const after = await enterCancelling(ctx, run);
    if (after) return { run: after, requested: true };
  }
  throw unavailable(`run ${runId} kept moving; try again`);
}

/**
 * Reads the run before its events: with the terminal event appended before the run says terminal,
 * a run seen terminal has its terminal event in the log (or in the archive, flows/archive.ts).
 */
export async function eventsPage(
  ctx: RunsContext,
  req: { owner_id: string; run_id: string; from: number; limit: number },
): Promise<RunEventPage> {
  const run = await loadOwnedRun(ctx, req.run_id, req.owner_id);
  const events = await readRunEvents(ctx, run, req.from, req.limit);
  return assemblePage(run, req.from, req.limit, events);
}

/** The runs asked for that the owner has, in the order asked; others are left out. */
export async function getRuns(ctx: RunsContext, ownerId: string, runIds: readonly string[]): Promise<RunDoc[]> {
  const found = await ctx.store.ownedRuns(ownerId, runIds);
  const byId = new Map(found.map((r) => [r._id, r]));
  return runIds.flatMap((id) => byId.get(id) ?? []);
}

/**
 * How many of the owner's runs are live, counted up to `atMost`. A run document can still say live
 * after its terminal decision (the follow-up writes are under way, or on FerretDB a racing move
 * rewrote it), so decided runs are left out: a run that has ended must free its place at once, or
 * a follow-up waiting for that place would be refused.
 */
export async function liveCount(ctx: RunsContext, ownerId: string, atMost: number): Promise<number> {
  // Runs decided but not yet written terminal are few (each is being finished right now): twice
  // the cap leaves room for them without reading an unbounded list.
  const candidates = await ctx.store.liveRunIds(ownerId, atMost * 2);
  if (candidates.length === 0) return 0;
  const decided = await ctx.store.decidedAmong(candidates);
  return Math.min(atMost, candidates.length - decided.length);
}

/**
 * The live run of a thread: the run of its latest slot, unless that run has ended. The terminal
 * decision counts, not only the run document: on FerretDB a move racing the decision (a cancel
 * against a completion) can rewrite the document as live after it said terminal. The move then
 * finishes the decision again, but its DOMAIN event is a duplicate by then, so threads, draining
 * its queue on the first one, must hear "free" here, or the queued follow-up waits forever.
 */
export async function liveRun(ctx: RunsContext, ownerId: string, threadId: string): Promise<RunDoc | null> {
  const slot = await ctx.store.latestSlot(threadId);
  if (!slot) return null;
  const run = await ctx.store.run(slot.run_id);
  if (!run || run.owner_id !== ownerId || run.terminal) return null;
  if (await settleIfTerminal(ctx, run)) return null;
  return run;
}
