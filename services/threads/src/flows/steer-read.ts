import type { SteerRead, SteerReadRequest } from '@threadwork/contracts';
import { AppError, isAppError, notFound } from '@threadwork/platform';
import type { z } from 'zod';
import type { Deps } from './deps.js';

// What the runner asks of threads: the steer it was signalled, before its harness gets it. The
// signal on `run.signal.<run>` only names the control; its text comes from here, for the runner
// holding the run the steer targets, so a forged or replayed signal cannot put words into a run.

/**
 * threads.steer.read: the pending steer `control_id` of run `run_id`, for the holder of that run
 * (its claim id, which the runs service checks). Every refusal is logged with the run id: a
 * control that is not a steer of that run (or of that run's owner) is `not_found`, one no longer
 * pending (already applied, or queued once its run ended) `already_settled`, and so is a caller
 * that does not hold the run.
 */
export async function readSteer(
  deps: Deps,
  req: z.output<typeof SteerReadRequest>,
): Promise<z.input<typeof SteerRead>> {
  const refuse = (err: AppError, reason: string): never => {
    deps.logger.warn({ run_id: req.run_id, control_id: req.control_id, reason }, 'refused a steer to a runner');
    throw err;
  };
  let holder;
  try {
    holder = await deps.peers.holder(req.run_id, req.claim_id);
  } catch (err) {
    if (isAppError(err) && (err.code === 'already_settled' || err.code === 'not_found')) {
      return refuse(err, 'the caller does not hold the run');
    }
    throw err;
  }
  const control = await deps.store.getControl(req.control_id);
  if (
    !control ||
    control.kind !== 'steer' ||
    control.target_run_id !== req.run_id ||
    control.owner_id !== holder.owner_id
  ) {
    return refuse(notFound('control'), 'no steer of this run by that id');
  }
  if (control.status !== 'pending') {
    return refuse(new AppError('already_settled', `control ${control._id} is ${control.status}`), control.status);
  }
  return { control_id: control._id, prompt: control.prompt };
}
