import { rpc, type RunError, type RunStatus, type RunUsage } from '@threadwork/contracts';
import { isAppError } from '@threadwork/platform';
import { callService } from '../clients/call.js';
import { DISK_FULL_ERROR, stepsTo, TIMEOUT_ERROR, type Decision } from '../domain/outcome.js';
import type { SandboxTakenError } from '../sandbox/provider.js';
import { refresh } from './claim.js';
import { overrun } from './disk-watch.js';
import { errorMessage, type JobResult, type RunState } from './run-state.js';

// The ways a job ends: the run moved through the state machine to where it was decided, or left
// to whoever holds it now, or handed back for another delivery. Every path out ends the run or
// hands the job back; none leaves a run live with nobody working it.

/** Ends the run, through whatever moves the state machine needs from where it stands. */
export async function finish(run: RunState, decision: Decision, usage?: RunUsage): Promise<JobResult> {
  if (decision.error) run.log.info({ error: decision.error }, `run ${decision.to}`);
  for (let round = 0; round < 3; round++) {
    const steps = stepsTo(run.status, decision.to);
    if (!steps) return settledResult(run);
    let ok = true;
    for (const to of steps) {
      const terminal = to === decision.to;
      if (!(await move(run, to, undefined, terminal ? decision.error : undefined, terminal ? usage : undefined))) {
        if (run.fenced) return { kind: 'abandon' };
        ok = false;
        break;
      }
      if (run.isTerminal) return { kind: 'ack' };
    }
    if (ok && run.isTerminal) return { kind: 'ack' };
    // Refused: the run moved meanwhile (a cancel, an answer). Read where it stands and go again.
    await refresh(run);
    if (run.fenced) return { kind: 'abandon' };
    if (run.isTerminal) return { kind: 'ack' };
  }
  // Never leave the run live: fail it from wherever it is.
  if (
    await move(run, 'failed', undefined, { code: 'runner_error', message: 'the run could not be ended as decided' })
  ) {
    return { kind: 'ack' };
  }
  return settledResult(run);
}

/** Moves the run after flushing the events before it; false when the move was refused. */
export async function move(
  run: RunState,
  to: RunStatus,
  sandboxId?: string,
  error?: RunError,
  usage?: RunUsage,
): Promise<boolean> {
  await run.sink.flush();
  try {
    const moved = await callService(run.deps.nc, rpc.runs.transition, {
      run_id: run.job.run_id,
      attempt: run.attempt,
      claim_id: run.claimId,
      to,
      ...(sandboxId ? { sandbox_id: sandboxId } : {}),
      ...(error ? { error } : {}),
      ...(usage ? { usage } : {}),
    });
    run.status = moved.status;
    if (moved.attempt !== run.attempt) run.fenced = true;
    return !run.fenced;
  } catch (err) {
    if (isAppError(err) && err.code === 'already_settled') {
      run.fenced = true;
      return false;
    }
    if (isAppError(err) && err.code === 'invalid_request') {
      run.log.debug({ err, to }, 'move refused');
      return false;
    }
    throw err;
  }
}

/** After the run ended or moved on without us: ack if it ended on our attempt, else leave the job alone. */
export async function settledResult(run: RunState): Promise<JobResult> {
  if (!run.fenced) await refresh(run).catch(() => undefined);
  return run.fenced ? { kind: 'abandon' } : { kind: 'ack' };
}

/** The sandbox was taken by a newer attempt, of this run or of one after it: nothing more is done to it. */
export async function sandboxTaken(run: RunState, err: SandboxTakenError): Promise<JobResult> {
  run.log.info({ attempt: run.attempt, reason: err.message }, 'the sandbox is a newer attempt’s; leaving the run');
  return settledResult(run);
}

/** A stop that came before the turn began. */
export async function afterStop(run: RunState): Promise<JobResult> {
  switch (run.stopReason) {
    case 'fenced':
      return { kind: 'abandon' };
    case 'shutdown':
      return { kind: 'nak', delayMs: 0 };
    case 'timeout':
      return finish(run, { to: 'failed', error: TIMEOUT_ERROR(run.deps.config.RUN_TIMEOUT_MS) });
    case 'disk_full':
      return finish(run, { to: 'failed', error: DISK_FULL_ERROR(overrun(run)) });
    default:
      return finish(run, { to: 'cancelled' });
  }
}

export async function failUnexpectedly(run: RunState, err: unknown): Promise<JobResult> {
  run.log.error({ err }, 'run failed unexpectedly');
  if (run.fenced) return { kind: 'abandon' };
  try {
    return await finish(run, { to: 'failed', error: { code: 'runner_error', message: errorMessage(err) } });
  } catch (again) {
    // The runs service is unreachable: hand the job back so the run is ended by a later delivery.
    run.log.error({ err: again }, 'the failed run could not be reported; handing the job back');
    return { kind: 'nak', delayMs: 10_000 };
  }
}
