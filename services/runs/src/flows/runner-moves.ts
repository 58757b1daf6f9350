import type { z } from 'zod';
import { invalidRequest, unavailable } from '@threadwork/platform';
import { RunStatusChunk, type AppendRequest, type TransitionRequest } from '@threadwork/contracts';
import { isHeldByRunner, isTerminal, transition } from '../domain/run-state.js';
import { MAX_ATOMIC_BATCH } from '../store/event-log.js';
import type { RunDoc } from '../store/runs.js';
import { announceMove, appendWhileLive } from './announce.js';
import type { RunsContext } from './context.js';
import { finishRun, settleIfTerminal } from './finish.js';
import { moveRun } from './lifecycle.js';
import { fencedRun, settled, stillHolding } from './runner-holder.js';

// What the holder of a run reports as it works the job: the run's moves and its events.

const MOVE_TRIES = 3;

/**
 * Moves a run for its runner. A stale attempt or a claim that did not make it is refused
 * (`already_settled`); an illegal move is
 * `invalid_request`; a run that already ended is returned as it stands (the runner lost a race,
 * e.g. its completion against a cancel, and learns the outcome from the run). Repeating the move
 * the run already made returns the run (and re-announces that move, deduplicated).
 */
export async function transitionRun(ctx: RunsContext, req: z.output<typeof TransitionRequest>): Promise<RunDoc> {
  for (let i = 0; i < MOVE_TRIES; i++) {
    const [fenced, decided] = await Promise.all([
      fencedRun(ctx, req.run_id, req.attempt, req.claim_id),
      ctx.store.terminal(req.run_id),
    ]);
    const run = (await settleIfTerminal(ctx, fenced, decided)) ?? fenced;
    if (run.terminal) return run;
    if (run.status === 'queued') throw invalidRequest(`run ${run._id} is not claimed yet`);

    const decision = transition(run.status, req.to);
    if (!decision.ok) {
      if (decision.reason !== 'unchanged') throw invalidRequest(decision.message);
      await announceMove(ctx, run);
      return run;
    }
    if (isTerminal(req.to)) {
      return finishRun(ctx, run, req.to, {
        error: req.to === 'failed' ? (req.error ?? { code: 'failed', message: 'the run failed' }) : req.error,
        usage: req.usage,
      });
    }
    const after = await moveRun(ctx, run, req.to, { sandbox_id: req.sandbox_id, usage: req.usage });
    if (after) return after;
  }
  throw unavailable(`run ${req.run_id} kept moving; try again`);
}

/**
 * Appends a runner's events to the run's log. Only the claim holding the current attempt of a run
 * may append. Runner keys live under `r:` so they can never collide with the keys of the events the
 * runs service writes itself.
 *
 * A runner streams its turn as batch after batch, each asking its replica again whether it holds
 * the run; a replica that read the run held by it lately knows without a read (stillHolding). Then
 * only the log's last event is read: unless it ends the run, the batch goes in conditional on it
 * being last still (JetStream's expected last subject sequence), so nothing lands behind a terminal
 * event that came meanwhile, nor behind the events of an attempt that took the run over — which it
 * could only do after this holder's lease ran out. Otherwise (a holder not seen holding the run
 * lately, or a log that moved on before the batch went in) the run is read: fenced, then checked
 * again after the log's end (appendWhileLive), so a fenced runner is refused at once.
 */
export async function appendEvents(ctx: RunsContext, req: z.output<typeof AppendRequest>): Promise<number[]> {
  const entries = req.events.map((e) => ({ key: `r:${e.key}`, chunk: e.chunk }));
  if (entries.length <= MAX_ATOMIC_BATCH && (await stillHolding(ctx, req.run_id, req.attempt, req.claim_id))) {
    const end = await ctx.log.lastEvent(req.run_id).catch(() => null);
    if (end && endsRun(end.chunk)) throw settled(`run ${req.run_id} has ended`);
    const stored = end && (await ctx.log.appendBatchAfter(req.run_id, end.sequence, entries));
    if (stored) return stored;
  }
  // The log's end is read beside the fence: what keeps the events out from behind a terminal
  // event or a newer attempt's is the look at the run that appendWhileLive makes after it. A read
  // that fails is made again there, so the fence's refusal (a run that is not there, a claim that
  // did not make the attempt) is what a refused caller hears.
  const [run, last] = await Promise.all([
    fencedRun(ctx, req.run_id, req.attempt, req.claim_id),
    ctx.log.lastSequence(req.run_id).catch(() => undefined),
  ]);
  if (run.terminal) throw settled(`run ${run._id} has ended`);
  if (!isHeldByRunner(run.status)) throw invalidRequest(`run ${run._id} is not claimed yet`);
  return appendWhileLive(ctx, run._id, entries, { attempt: req.attempt, last });
}

/** Whether a logged event is its run's terminal `run.status`. */
function endsRun(chunk: unknown): boolean {
  const status = RunStatusChunk.safeParse(chunk);
  return status.success && isTerminal(status.data.status);
}
