import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { AppError, invalidRequest, isDuplicateKeyError, notFound, unavailable } from '@threadwork/platform';
import type {
  AppendRequest,
  AttemptState,
  AttemptStateRequest,
  ClaimRequest,
  HolderResponse,
  ReleaseRequest,
  RunJob,
  TransitionRequest,
} from '@threadwork/contracts';
import { leaseMs } from '../config.js';
import { decideClaim, isHeldByRunner, isTerminal, transition } from '../domain/run-state.js';
import { toJob, type RunDoc } from '../store/runs.js';
import { loadRun, staleAttempt, type RunsContext } from './context.js';
import { announceMove, appendWhileLive, finishRun, moveRun, settleIfTerminal } from './lifecycle.js';

// What a runner asks of the runs service while it works a job: claim an attempt, move the run,
// append events. Everything but the claim is fenced by the attempt the claim gave it and by the
// claim's secret: holding the runner's NATS key is not enough to act for a run, one must have
// claimed it.

const MOVE_TRIES = 3;

const settled = (message: string) => new AppError('already_settled', message);

/** What is kept of a claim id: enough to recognise it, nothing to present as it. */
const claimHash = (claimId: string) => createHash('sha256').update(claimId).digest('hex');

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
    const terminal = run.terminal || (await ctx.store.terminals.findOne({ _id: run._id })) !== null;
    throw new AppError('already_settled', err.message, { details: { ...err.details, terminal } });
  }
}

async function claimAttempt(
  ctx: RunsContext,
  req: z.output<typeof ClaimRequest>,
): Promise<{ run: RunDoc; attempt: number; job: RunJob }> {
  let run = await loadRun(ctx, req.run_id);
  if (!run.terminal) run = (await settleIfTerminal(ctx, run)) ?? run;
  const last = await ctx.store.attempts.find({ run_id: run._id }).sort({ attempt: -1 }).limit(1).next();
  // A retry of a claim already made (its answer lost, or the first try still under way): the
  // attempt it made is the caller's — finish adopting it rather than claim the next one — unless
  // a later claim has taken the run over since, which fences this one out.
  const claimSha256 = claimHash(req.claim_id);
  const mine = await ctx.store.attempts.findOne({ run_id: run._id, claim_sha256: claimSha256 });
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
    await ctx.store.attempts.insertOne({
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
    const holder = await ctx.store.attempts.findOne({ _id: `${run._id}:${attempt}` });
    if (holder?.claim_sha256 === claimSha256) return adoptAttempt(ctx, run, attempt, req.runner_id);
    throw settled(`attempt ${attempt} of run ${run._id} was claimed by another runner`);
  }
  return adoptAttempt(ctx, run, attempt, req.runner_id);
}

/**
 * The run as its runner may act on it: at `attempt`, which the claim `claimId` made. Another claim
 * id is refused (`already_settled`, logged with the run id): a runner key that did not claim the
 * attempt cannot move it or write to it. A stale attempt is refused as before (`already_settled`,
 * with the current attempt in `details`), and only to the claim that made it.
 */
export async function fencedRun(ctx: RunsContext, runId: string, attempt: number, claimId: string): Promise<RunDoc> {
  const run = await loadRun(ctx, runId);
  if ((await ctx.store.claimOf(run._id, attempt)) !== claimHash(claimId)) {
    ctx.logger.warn({ run_id: run._id, attempt }, 'refused a runner call: its claim did not make this attempt');
    throw settled(`attempt ${attempt} of run ${run._id} is not held by this claim`);
  }
  if (run.attempt !== attempt) throw staleAttempt(run, attempt);
  if (!run.terminal) await heardFrom(ctx, run._id, attempt);
  return run;
}

/** The holder of `attempt` spoke: its lease runs again from now (written every quarter lease). */
function heardFrom(ctx: RunsContext, runId: string, attempt: number): Promise<void> {
  const lease = leaseMs(ctx.config);
  return ctx.store.hear(runId, attempt, new Date(), Math.floor(lease / 4));
}

/**
 * The live run that `claimId` holds: its current attempt is the one that claim made. Refused
 * (`already_settled`) for a run that ended or moved on to a newer attempt, and for a claim id
 * that never held it — a runner acts for the runs it holds, not for any run it can name.
 */
export async function holdingRun(ctx: RunsContext, runId: string, claimId: string): Promise<RunDoc> {
  const run = await ctx.store.runs.findOne({ _id: runId });
  if (!run) throw notFound('run');
  const attempt = await ctx.store.attempts.findOne({ _id: `${run._id}:${run.attempt}` });
  if (run.terminal || run.status === 'queued' || attempt?.claim_sha256 !== claimHash(claimId)) {
    throw settled(`run ${run._id} is not held by this claim`);
  }
  await heardFrom(ctx, run._id, run.attempt);
  return run;
}

/**
 * Where a run stands, for the claim that made attempt `attempt` of it (the runner's poll, and its
 * look before it acts on a sandbox): a run it did not claim is `not_found`, logged with the run id.
 * The poll of the current attempt renews its lease: the runner polls for the whole of a job, also
 * while a question waits for its answer and between moves.
 */
export async function attemptState(
  ctx: RunsContext,
  req: z.output<typeof AttemptStateRequest>,
): Promise<z.input<typeof AttemptState>> {
  const run = await ctx.store.runs.findOne({ _id: req.run_id });
  if (run && (await ctx.store.claimOf(run._id, req.attempt)) === claimHash(req.claim_id)) {
    if (run.attempt === req.attempt && !run.terminal) await heardFrom(ctx, run._id, req.attempt);
    return { status: run.status, attempt: run.attempt, terminal: run.terminal };
  }
  if (run)
    ctx.logger.warn(
      { run_id: run._id, attempt: req.attempt },
      'refused a run read: its claim did not make this attempt',
    );
  throw notFound('run');
}

/**
 * The holder hands its run back (it naks the job): its lease ends now, so the job's next runner
 * need not wait it out. Marked apart from `heard_at`, which a poll still in flight may write after.
 */
export async function releaseRun(
  ctx: RunsContext,
  req: z.output<typeof ReleaseRequest>,
): Promise<{ released: boolean }> {
  const run = await fencedRun(ctx, req.run_id, req.attempt, req.claim_id);
  if (run.terminal) return { released: false };
  await ctx.store.attempts.updateOne({ _id: `${run._id}:${req.attempt}` }, { $set: { released_at: new Date() } });
  ctx.logger.info({ run_id: run._id, attempt: req.attempt }, 'the holder handed the run back');
  return { released: true };
}

/** What the holder of a live run may be given access to: its owner's repositories of the run. */
export async function describeHolder(
  ctx: RunsContext,
  runId: string,
  claimId: string,
): Promise<z.input<typeof HolderResponse>> {
  const run = await holdingRun(ctx, runId, claimId);
  return { owner_id: run.owner_id, repository_ids: run.repositories.map((r) => r.repository_id) };
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
  const after = await ctx.store.runs.findOneAndUpdate(
    { _id: run._id, attempt: { $lt: attempt }, terminal: false },
    { $set: { attempt, runner_id: runnerId, updated_at: new Date() } },
    { returnDocument: 'after' },
  );
  if (!after) return null;
  return (await settleIfTerminal(ctx, after)) ?? after;
}

/**
 * Moves a run for its runner. A stale attempt or a claim that did not make it is refused
 * (`already_settled`); an illegal move is
 * `invalid_request`; a run that already ended is returned as it stands (the runner lost a race,
 * e.g. its completion against a cancel, and learns the outcome from the run). Repeating the move
 * the run already made returns the run (and re-announces that move, deduplicated).
 */
export async function transitionRun(ctx: RunsContext, req: z.output<typeof TransitionRequest>): Promise<RunDoc> {
  for (let i = 0; i < MOVE_TRIES; i++) {
    let run = await fencedRun(ctx, req.run_id, req.attempt, req.claim_id);
    if (!run.terminal) run = (await settleIfTerminal(ctx, run)) ?? run;
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
 * may append; the run is read on every call (an index lookup) rather than cached, so a fenced
 * runner is refused at once (the attempt's claim is remembered: it never changes). Runner keys
 * live under `r:` so they can never collide with the keys of the events the runs service writes
 * itself.
 */
export async function appendEvents(ctx: RunsContext, req: z.output<typeof AppendRequest>): Promise<number[]> {
  const run = await fencedRun(ctx, req.run_id, req.attempt, req.claim_id);
  if (run.terminal) throw settled(`run ${run._id} has ended`);
  if (!isHeldByRunner(run.status)) throw invalidRequest(`run ${run._id} is not claimed yet`);
  return appendWhileLive(
    ctx,
    run._id,
    req.events.map((e) => ({ key: `r:${e.key}`, chunk: e.chunk })),
  );
}
