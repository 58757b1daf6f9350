import type { z } from 'zod';
import { invalidRequest, unavailable } from '@threadwork/platform';
import type { AppendRequest, TransitionRequest } from '@threadwork/contracts';
import { isHeldByRunner, isTerminal, transition } from '../domain/run-state.js';
import { MAX_ATOMIC_BATCH } from '../store/event-log.js';
import type { RunDoc } from '../store/runs.js';
import { announceMove, appendWhileLive } from './announce.js';
import type { RunsContext } from './context.js';
import { finishRun, settleIfTerminal } from './finish.js';
import { moveAttempt, moveRun } from './lifecycle.js';
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
      if (moveAttempt(run) === run.attempt) {
        await announceMove(ctx, run);
        return run;
      }
      // Taken over where the lost attempt left it: this attempt's move to the same status is a move
      // of its own, announced under its key. Announced again, the lost attempt's event would rely on
      // the stream's dedupe, whose window may be long over, and the log would not tell of the
      // new attempt.
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
 * A runner streams its turn as batch after batch. When its replica may take it to hold the run
 * still (stillHolding) and the log's last event is one its attempt wrote, the batch goes in behind
 * that event, conditional on it being last still (JetStream's expected last subject sequence): no
 * read of the run. The log then ends with this attempt's own event, so no terminal event is in it
 * (the runs service writes those) and no newer attempt has written to it; nor can either land
 * before the batch. Otherwise the run is read: fenced, then checked again after the log's end
 * (appendWhileLive).
 */
export async function appendEvents(ctx: RunsContext, req: z.output<typeof AppendRequest>): Promise<number[]> {
  const entries = req.events.map((e) => ({ key: `r:${e.key}`, chunk: e.chunk, runnerAttempt: req.attempt }));
  if (entries.length <= MAX_ATOMIC_BATCH && (await stillHolding(ctx, req.run_id, req.attempt, req.claim_id))) {
    const end = await ctx.log.end(req.run_id).catch(() => null);
    const stored =
      end?.runnerAttempt === req.attempt && (await ctx.log.appendBatchAfter(req.run_id, end.sequence, entries));
    if (stored) return stored;
  }
  // The log's end is read beside the fence: what keeps the events out from behind a terminal
  // event or a newer attempt's is the look at the run that appendWhileLive makes after it. A read
  // that fails is made again there, so the fence's refusal (a run that is not there, a claim that
  // did not make the attempt) is what a refused caller hears.
  const readAt = new Date();
  const [run, last] = await Promise.all([
    fencedRun(ctx, req.run_id, req.attempt, req.claim_id),
    ctx.log.lastSequence(req.run_id).catch(() => undefined),
  ]);
  if (run.terminal) throw settled(`run ${run._id} has ended`);
  if (!isHeldByRunner(run.status)) throw invalidRequest(`run ${run._id} is not claimed yet`);
  const sequences = await appendWhileLive(ctx, run._id, entries, { attempt: req.attempt, last });
  // In: the run was held by this attempt, and not ended, when read (see stillHolding).
  ctx.store.noteHeld(run._id, req.attempt, readAt);
  return sequences;
}
