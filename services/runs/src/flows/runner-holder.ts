import { createHash } from 'node:crypto';
import type { z } from 'zod';
import { AppError, notFound } from '@threadwork/platform';
import type { AttemptState, AttemptStateRequest, HolderResponse, ReleaseRequest } from '@threadwork/contracts';
import { leaseMs } from '../config.js';
import type { RunDoc } from '../store/runs.js';
import { loadRun, staleAttempt, type RunsContext } from './context.js';

// Everything a runner asks of the runs service after its claim is fenced by the attempt the claim
// gave it and by the claim's secret: holding the runner's NATS key is not enough to act for a run,
// one must have claimed it. The holder's calls also renew its lease.

export const settled = (message: string) => new AppError('already_settled', message);

/** What is kept of a claim id: enough to recognise it, nothing to present as it. */
export const claimHash = (claimId: string) => createHash('sha256').update(claimId).digest('hex');

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

/**
 * Whether the claim `claimId` may be taken to hold attempt `attempt` of a run still, without
 * reading the run: the claim made the attempt, and an append of its holder through this replica,
 * which read the run (fencedRun, then the decision after the log's end), went in less than half a
 * lease ago, with no hand-back through this replica since. That read renewed the holder's lease
 * (its heard time, written at most a quarter lease before), so a newer attempt could be claimed
 * three quarters of a lease after it at the earliest (runner-claim.ts): a holder frozen or cut off
 * for its lease is read again. Renews the lease, as every call of the holder does. False says
 * nothing either way: fencedRun decides.
 */
export async function stillHolding(
  ctx: RunsContext,
  runId: string,
  attempt: number,
  claimId: string,
): Promise<boolean> {
  if (!ctx.store.heldWithin(runId, attempt, new Date(), leaseMs(ctx.config) / 2)) return false;
  if ((await ctx.store.claimOf(runId, attempt)) !== claimHash(claimId)) return false;
  await heardFrom(ctx, runId, attempt);
  return true;
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
  const run = await ctx.store.run(runId);
  if (!run) throw notFound('run');
  const attempt = await ctx.store.attempt(run._id, run.attempt);
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
  const run = await ctx.store.run(req.run_id);
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
  await ctx.store.releaseAttempt(run._id, req.attempt, new Date());
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
