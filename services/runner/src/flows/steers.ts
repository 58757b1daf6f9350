import { domainEvents, rpc, type ControlAppliedEvent } from '@threadwork/contracts';
import { isAppError } from '@threadwork/platform';
import { callService } from '../clients/call.js';
import type { RunState } from './run-state.js';

// Steers: text its owner sends a run while its turn goes on, given to the harness in the order
// they were signalled, each only once the threads service confirms it.

/**
 * Steers go to the turn once it has started, one at a time in the order signalled; a steer after
 * the turn ended is left to the threads service (it queues it). Each is read back from the
 * threads service first, by this attempt's claim: only a pending steer of this run reaches the
 * harness, with the text its owner sent, whatever the signal was.
 */
export async function applySteers(run: RunState): Promise<void> {
  const session = run.session;
  if (!session || !run.turnStarted || run.steering) return;
  run.steering = true;
  try {
    while (run.pendingSteers.length > 0 && !run.turnEnded) {
      const controlId = run.pendingSteers.shift()!;
      const prompt = await readSteer(run, controlId);
      if (prompt === null) continue;
      if (!(await session.steer(prompt))) {
        run.log.info({ control_id: controlId }, 'steer not applied: the turn has ended');
        continue;
      }
      run.sink.push({ type: 'control.applied', control_id: controlId, kind: 'steer' });
      const event: ControlAppliedEvent = {
        control_id: controlId,
        run_id: run.job.run_id,
        thread_id: run.job.thread_id,
        at: new Date().toISOString(),
      };
      await run.publish(domainEvents.controlApplied, event, `${controlId}:applied`);
    }
  } finally {
    run.steering = false;
  }
  // Signalled while the last one was being given: it would wait for a signal that has come.
  if (run.pendingSteers.length > 0 && !run.turnEnded) void applySteers(run);
}

/**
 * The text of steer `controlId` as the threads service holds it, or null (logged with the run's
 * id) for a control that is no pending steer of this run: unknown, another run's, already
 * applied. One the threads service cannot be asked about now is dropped too; it stays pending
 * there, and is queued once the run ends.
 */
async function readSteer(run: RunState, controlId: string): Promise<string | null> {
  try {
    const steer = await callService(
      run.deps.nc,
      rpc.threads.steerRead,
      { run_id: run.job.run_id, claim_id: run.claimId, control_id: controlId },
      5_000,
    );
    return steer.prompt;
  } catch (err) {
    if (isAppError(err) && (err.code === 'not_found' || err.code === 'already_settled')) {
      run.log.warn({ control_id: controlId, reason: err.message }, 'steer dropped: no pending steer of this run');
    } else {
      run.log.warn({ err, control_id: controlId }, 'steer dropped: the threads service could not confirm it');
    }
    return null;
  }
}
