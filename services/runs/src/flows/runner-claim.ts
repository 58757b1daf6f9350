import type { z } from 'zod';
import { AppError, isDuplicateKeyError } from '@threadwork/platform';
import type { ClaimRequest, RunJob } from '@threadwork/contracts';
import { leaseMs } from '../config.js';
import { decideClaim } from '../domain/run-state.js';
import { toJob, type RunDoc } from '../store/runs.js';
import { loadRun, type RunsContext } from './context.js';
import { finishRun, settleIfTerminal } from './finish.js';
import { moveRun } from './lifecycle.js';
import { claimHash, settled } from './runner-holder.js';

// The first thing a runner asks of the runs service for a job it took: to claim an attempt of its
// run. The claim's secret is what fences every later call of the runner (runner-holder.ts).

/**
 * Claims the next attempt of a run for a runner that took its job. Racing runners race for the
 * same attempt number, and the unique insert into run_attempts picks one; the others get
 * `already_settled` and must not run the job. A redelivered job (its runner died) claims the
 * attempt after the last one, which fences the old runner out; past RUN_MAX_ATTEMPTS the run
 * fails with `runner_lost` instead. Neither happens while the holder's lease lasts (it was heard
 * from within RUN_LEASE_MS): such a claim is refused `unavailable` with `details.retry_after_ms`,
 * so a runner key cannot take a live run from its runner, and a redelivered job waits for it. A
 * refusal `already_settled` says in `details.terminal` whether the run is over, so the refused
 * runner knows whether its job is done with or another claim's, without a read of the run for an
 * owner.
 */
export async function claimRun(
  ctx: RunsContext,
  req: z.output<typeof ClaimRequest>,
): Promise<{ run: RunDoc; attempt: number; job: RunJob }> {
  try {
    return await claimAttempt(ctx, req);
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'already_settled') throw err;
    const run = await loadRun(ctx, req.run_id);
    const terminal = run.terminal || (await ctx.store.terminal(run._id)) !== null;
    throw new AppError('already_settled', err.message, { details: { ...err.details, terminal } });
  }
}

async function claimAttempt(
  ctx: RunsContext,
  req: z.output<typeof ClaimRequest>,
): Promise<{ run: RunDoc; attempt: number; job: RunJob }> {
  // The attempts are read after the run, so they are at least as new as it (a takeover inserts its
  // attempt before it moves the run); the terminal decision with them, as it was read after it.
  const found = await loadRun(ctx, req.run_id);
  const [decided, attempts] = await Promise.all([ctx.store.terminal(found._id), ctx.store.attemptsOf(found._id)]);
  const run = (await settleIfTerminal(ctx, found, decided)) ?? found;
  const last = attempts[0] ?? null;
  // A retry of a claim already made (its answer lost, or the first try still under way): the
  // attempt it made is the caller's — finish adopting it rather than claim the next one — unless
  // a later claim has taken the run over since, which fences this one out.
  const claimSha256 = claimHash(req.claim_id);
  const mine = attempts.find((a) => a.claim_sha256 === claimSha256);
  if (mine) {
    if (last && last.attempt > mine.attempt) {
      throw settled(`attempt ${mine.attempt} of run ${run._id} was taken over by attempt ${last.attempt}`);
    }
    return adoptAttempt(ctx, run, mine.attempt, req.runner_id);
  }
  const decision = decideClaim(
    run.status,
    last ? { attempt: last.attempt, heardAt: last.released_at ? null : (last.heard_at ?? last.at) } : null,
    ctx.config.RUN_MAX_ATTEMPTS,
    { leaseMs: leaseMs(ctx.config), now: new Date() },
  );

  switch (decision.kind) {
    case 'refuse':
      throw settled(decision.message);
    case 'held':
      ctx.logger.warn(
        { run_id: run._id, runner_id: req.runner_id, holder_runner_id: last?.runner_id, attempt: last?.attempt },
        'refused a claim: the run is held by a runner whose lease has not run out',
      );
      throw new AppError('unavailable', `run ${run._id} is held by a live runner; try again once its lease ran out`, {
        details: { retry_after_ms: decision.retryAfterMs },
      });
    case 'finish_cancel': {
      const done = await finishRun(ctx, run, 'cancelled');
      throw settled(`run was cancelling when its runner went away; it is now ${done.status}`);
    }
    case 'exhausted': {
      const done = await finishRun(ctx, run, 'failed', {
        error: { code: 'runner_lost', message: `no runner finished the run in ${decision.attempts} attempts` },
      });
      throw settled(`run is ${done.status}: every attempt is spent`);
    }
    case 'claim':
      break;
  }

  const { attempt } = decision;
  try {
    await ctx.store.insertAttempt({
      _id: `${run._id}:${attempt}`,
      run_id: run._id,
      attempt,
      runner_id: req.runner_id,
      claim_sha256: claimSha256,
      at: new Date(),
    });
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    // A twin of this very claim (a retry racing its first try) inserted it: it is ours too.
    const holder = await ctx.store.attempt(run._id, attempt);
    if (holder?.claim_sha256 === claimSha256) return adoptAttempt(ctx, run, attempt, req.runner_id);
    throw settled(`attempt ${attempt} of run ${run._id} was claimed by another runner`);
  }
  return adoptAttempt(ctx, run, attempt, req.runner_id);
}

/**
 * Makes the run's attempt the one claimed: a queued run starts, a held one is taken over. Done by
 * the claim and, with the same outcome, by a retry of it; when a twin got there first, the run
 * already shows the attempt, and that is success too.
 */
async function adoptAttempt(
  ctx: RunsContext,
  run: RunDoc,
  attempt: number,
  runnerId: string,
): Promise<{ run: RunDoc; attempt: number; job: RunJob }> {
  let claimed: RunDoc | null = run.attempt === attempt && run.status !== 'queued' ? run : null;
  if (!claimed && run.attempt <= attempt && !run.terminal) {
    claimed =
      run.status === 'queued'
        ? await moveRun(ctx, run, 'starting', { attempt, runner_id: runnerId, cause: 'claim' })
        : await takeOver(ctx, run, attempt, runnerId);
  }
  const now = claimed ?? (await loadRun(ctx, run._id));
  if (now.terminal || now.attempt !== attempt || now.status === 'queued') {
    throw settled(
      `run ${run._id} moved on while attempt ${attempt} was claimed (now ${now.status}, attempt ${now.attempt})`,
    );
  }
  return { run: now, attempt, job: toJob(now) };
}

/** A redelivered job's runner takes the run over where it stands; the status does not change. */
async function takeOver(ctx: RunsContext, run: RunDoc, attempt: number, runnerId: string): Promise<RunDoc | null> {
  const after = await ctx.store.takeOver(run._id, attempt, runnerId, new Date());
  if (!after) return null;
  return (await settleIfTerminal(ctx, after)) ?? after;
}
