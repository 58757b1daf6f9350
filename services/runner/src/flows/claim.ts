import { rpc, RunSignal, subjects, type Run, type RunJob, type RunTicket } from '@threadwork/contracts';
import { decodeJson, isAppError, isPlainPublish, type Logger, type NatsConnection } from '@threadwork/platform';
import { callService, retryAfterMs } from '../clients/call.js';
import { attemptHolds, readAttempt, type AttemptRef } from '../clients/runs.js';
import { newClaimId } from '../domain/ids.js';
import type { SandboxClaim } from '../sandbox/provider.js';
import type { JobResult, RunDeps, RunState } from './run-state.js';
import { applySteers } from './steers.js';

// Holding a run: claiming it for this runner, handing it back, and knowing at every moment
// whether this attempt still holds it — by signals (cancel, steer, answers), which are hints, and
// by polling the runs service, which is the truth (and renews this runner's lease).

/** Bounds of the delay a job is handed back with while another runner's lease holds its run. */
const MIN_HELD_NAK_MS = 500;
const MAX_HELD_NAK_MS = 60_000;

export interface Claim {
  run: Run;
  attempt: number;
  job: RunJob;
  claimId: string;
}

/** The run of `job`, claimed for this runner; or what to do with the job when it cannot be. */
export async function claimJob(
  deps: RunDeps,
  job: RunTicket,
  log: Logger,
): Promise<{ ok: true; claim: Claim } | { ok: false; result: JobResult }> {
  try {
    const claimId = newClaimId();
    const claim = await callService(
      deps.nc,
      rpc.runs.claim,
      { run_id: job.run_id, runner_id: deps.runnerId, claim_id: claimId },
      10_000,
    );
    return { ok: true, claim: { ...claim, claimId } };
  } catch (err) {
    if (isAppError(err) && err.code === 'not_found') {
      log.info({ reason: err.message }, 'job dropped: the run does not exist');
      return { ok: false, result: { kind: 'ack' } };
    }
    if (isAppError(err) && err.code === 'already_settled') {
      // Either the run is over, and so is its job; or another runner won this attempt and works the
      // job now: acking would take it from under that runner, which could then die with nobody to
      // redeliver it to. Left alone, the job is the holder's to finish (or comes back if it dies).
      // The refusal says which (`details.terminal`); when it does not, the run is taken as live (the safe answer).
      if (err.details?.terminal !== true) {
        log.info({ reason: err.message }, 'job left to the runner that holds the run');
        return { ok: false, result: { kind: 'abandon' } };
      }
      log.info({ reason: err.message }, 'job dropped: the run is over');
      return { ok: false, result: { kind: 'ack' } };
    }
    const heldFor = retryAfterMs(err);
    if (heldFor !== null) {
      // Another runner holds the run and was heard from within its lease: alive, however JetStream
      // came to redeliver its job. Handed back, the job comes again once the lease may have run out,
      // and is claimed then if the holder stayed silent (or found done if it finished).
      log.info({ retry_after_ms: heldFor }, 'job handed back: the run is held by a live runner');
      const delayMs = Math.min(MAX_HELD_NAK_MS, Math.max(MIN_HELD_NAK_MS, heldFor + 250));
      return { ok: false, result: { kind: 'nak', delayMs } };
    }
    if (isAppError(err) && err.retryable) return { ok: false, result: { kind: 'nak', delayMs: 5_000 } };
    throw err;
  }
}

/**
 * Ends this runner's lease on a run it handed back, so the job's next runner claims the run at
 * once. Best effort: unreleased, the lease runs out by itself.
 */
export async function releaseRun(deps: RunDeps, ref: AttemptRef, log: Logger): Promise<void> {
  await callService(deps.nc, rpc.runs.release, ref, 2_000).catch((err: unknown) =>
    log.info({ err }, 'the run was not released; the next runner claims it once its lease ran out'),
  );
}

/** Listens for the run's signals for as long as the subscription is kept. */
export function listenForSignals(run: RunState): ReturnType<NatsConnection['subscribe']> {
  return run.deps.nc.subscribe(subjects.runSignal(run.job.run_id), {
    callback: (err, msg) => {
      if (err) return;
      if (!isPlainPublish(msg)) {
        run.log.warn({ reply: msg.reply }, 'refused a signal that was not published as one');
        return;
      }
      try {
        const parsed = RunSignal.safeParse(decodeJson(msg.data));
        if (parsed.success) onSignal(run, parsed.data);
      } catch {
        // Not JSON: not a signal of ours.
      }
    },
  });
}

function onSignal(run: RunState, signal: RunSignal): void {
  switch (signal.type) {
    case 'cancel':
      confirmCancel(run);
      return;
    case 'steer':
      if (run.steersSignalled.has(signal.control_id)) {
        run.log.warn({ control_id: signal.control_id }, 'steer dropped: its control was signalled before');
        return;
      }
      run.steersSignalled.add(signal.control_id);
      run.pendingSteers.push(signal.control_id);
      void applySteers(run);
      return;
    case 'interaction':
      run.wakeQuestion?.();
      return;
  }
}

/**
 * A cancel signal is a hint: anyone who may signal could send one. The run stops only once the
 * runs service shows it cancelling (or taken over); otherwise the signal is refused and logged.
 * A signal that arrives while one is being checked is checked again after it (the first check
 * may have read the run just before its cancel was written), never more than one at a time.
 */
function confirmCancel(run: RunState): void {
  if (run.cancelCheck) {
    run.cancelRecheck = true;
    return;
  }
  run.cancelCheck = (async () => {
    do {
      run.cancelRecheck = false;
      await checkCancel(run);
    } while (run.cancelRecheck && !run.stopReason);
  })().finally(() => {
    run.cancelCheck = null;
  });
}

async function checkCancel(run: RunState): Promise<void> {
  try {
    const state = await readAttempt(run.deps.nc, run.attemptRef(), 0);
    if (state.attempt !== run.attempt || state.terminal) run.stop('fenced');
    else if (state.status === 'cancelling') run.stop('cancel');
    else
      run.log.warn(
        { status: state.status },
        'refused a cancel signal: the runs service does not show the run cancelling',
      );
  } catch (err) {
    // The poll still sees a real cancel once the runs service answers again.
    run.log.debug({ err }, 'cancel signal not checked: the runs service did not answer');
  }
}

/** Signals are core NATS and can be missed; the run's state in the runs service cannot. */
export async function pollRun(run: RunState): Promise<void> {
  // Polled for the whole of the job, also once the turn ended or a stop began: each poll renews
  // this runner's lease on the run, which keeps any other claim from taking it over meanwhile.
  try {
    const state = await readAttempt(run.deps.nc, run.attemptRef(), 0);
    if (run.stopReason || run.turnEnded) return;
    if (state.attempt !== run.attempt || state.terminal) run.stop('fenced');
    else if (state.status === 'cancelling') run.stop('cancel');
  } catch (err) {
    run.log.debug({ err }, 'run poll failed');
  }
}

/** Reads where the run stands now, and whether a newer attempt took it over. */
export async function refresh(run: RunState): Promise<void> {
  const state = await readAttempt(run.deps.nc, run.attemptRef());
  run.status = state.status;
  if (state.attempt !== run.attempt) run.fenced = true;
}

/** This attempt, as the sandbox takes it: whether it still holds the run is asked of the runs service. */
export function sandboxClaim(run: RunState): SandboxClaim {
  return {
    run_id: run.job.run_id,
    attempt: run.attempt,
    runner_id: run.deps.runnerId,
    claim_id: run.claimId,
    holds: () => attemptHolds(run.deps.nc, run.attemptRef()),
  };
}
