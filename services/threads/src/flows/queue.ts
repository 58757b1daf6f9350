import type { Run } from '@threadwork/contracts';
import { isRecorded, type ControlRecord, type ThreadRecord } from '../store/records.js';
import { admitWithMessage, isThreadBusy, recordRun } from './admission.js';
import type { Deps } from './deps.js';
import { hasRoom } from './limits.js';

/** A control's run: its admission key is the control id, so every applier gets the same run. */
async function admitControl(deps: Deps, thread: ThreadRecord, control: ControlRecord): Promise<Run | null> {
  let run: Run;
  try {
    run = await admitWithMessage(deps, thread, {
      message_id: control.message_id,
      run_id: control.run_id,
      prompt: control.prompt,
      admission_key: control._id,
      collaboration_mode: control.collaboration_mode,
    });
  } catch (err) {
    // Another run got the thread first; this control stays pending until that run ends.
    if (isThreadBusy(err)) return null;
    throw err;
  }
  await deps.store.markControlApplied(control._id, { createdRunId: run.id, at: new Date() });
  return run;
}

/**
 * Records the admission of the pending control whose run `run` is, if there is one: the run as the
 * thread's latest, its message shown, the control applied. The run exists while its control is
 * still pending when whoever admitted it gave up before hearing back (runs.admit timed out on a
 * busy machine, or the process stopped); left so, the control would name no run until its own run
 * had ended. `run` is as runs reports it, so runs is not asked again; every write is conditional,
 * and a twin still recording the same admission writes the same.
 */
async function recordControlAdmission(
  deps: Deps,
  thread: ThreadRecord,
  run: Run,
): Promise<{ controlId: string; run: Run } | null> {
  const control = await deps.store.pendingControlForRun(thread._id, run.id);
  if (!control) return null;
  deps.logger.info({ controlId: control._id, runId: run.id }, 'recording the admission of a control whose run is live');
  await recordRun(deps, run);
  await deps.store.showMessage(`${thread._id}/${control.message_id}`, {
    parts: [{ type: 'text', text: control.prompt }],
    run_id: run.id,
    created_at: new Date(),
  });
  await deps.store.markControlApplied(control._id, { createdRunId: run.id, at: new Date() });
  return { controlId: control._id, run };
}

/** What draining a thread's queue came to. */
type Drained =
  | { kind: 'admitted'; controlId: string; run: Run }
  /** A run is live on the thread (its end drains the queue again). */
  | { kind: 'busy' }
  /** Nothing pending. */
  | { kind: 'empty' }
  /** The owner is at MAX_LIVE_RUNS_PER_USER: the control stays pending and the thread waits for room. */
  | { kind: 'full' };

/**
 * Admits the control's run unless the owner is at the live-run limit. Refused, the thread is
 * marked waiting *before* the count is looked at again: a run of the owner ending meanwhile then
 * either shows in the second count or finds the mark (drainWaiting) — the control is never left
 * pending with nobody to retry it.
 */
async function admitWithinLimit(
  deps: Deps,
  thread: ThreadRecord,
  control: ControlRecord,
): Promise<Run | 'full' | null> {
  if (deps.limits.liveRunsPerUser === 0) return admitControl(deps, thread, control);
  return deps.serial.run(thread.owner_id, async () => {
    if (!(await hasRoom(deps, thread.owner_id))) {
      await deps.store.markWaiting(thread);
      if (!(await hasRoom(deps, thread.owner_id))) return 'full';
    }
    return admitControl(deps, thread, control);
  });
}

async function drain(deps: Deps, thread: ThreadRecord): Promise<Drained> {
  const live = await deps.peers.liveRun(thread.owner_id, thread._id);
  if (live) {
    const recorded = await recordControlAdmission(deps, thread, live);
    return recorded ? { kind: 'admitted', ...recorded } : { kind: 'busy' };
  }
  for (;;) {
    const control = await deps.store.oldestPendingControl(thread._id);
    if (!control) return { kind: 'empty' };
    const run = await admitWithinLimit(deps, thread, control);
    if (run === 'full') {
      deps.logger.info({ controlId: control._id, threadId: thread._id }, 'owner at the live-run limit; control waits');
      return { kind: 'full' };
    }
    if (!run) return { kind: 'busy' };
    if (!run.terminal) return { kind: 'admitted', controlId: control._id, run };
    // The control had admitted this run before, but whoever did so stopped before marking it
    // applied, and the run has ended since: the control is applied now, and the queue moves on.
    deps.logger.info({ controlId: control._id, runId: run.id }, 'control had admitted an ended run');
  }
}

/**
 * When the thread is idle, the oldest pending control (a queue item, or a steer whose run ended
 * before the harness took it) admits the next run — unless its owner is at the live-run limit:
 * then it stays pending and the thread waits for one of the owner's runs to end (drainWaiting).
 * Safe to call any number of times, from any replica: a second caller either admits with the same
 * control id (the same run comes back) or finds the thread busy. Returns the control that admitted
 * a run, and the run.
 *
 * A live run keeps the queue waiting, unless it is a pending control's own run: a drain that
 * timed out waiting for runs.admit after runs had admitted it (and is being retried) finds the
 * thread busy with that run, and records its admission instead of leaving it pending.
 */
export async function drainQueue(deps: Deps, thread: ThreadRecord): Promise<{ controlId: string; run: Run } | null> {
  const drained = await drain(deps, thread);
  return drained.kind === 'admitted' ? drained : null;
}

/** Waiting threads looked at per call; past the first that finds no room the rest keep waiting. */
const WAITS_BATCH = 50;

/**
 * Gives room that opened up (one of the owner's runs ended) to the owner's threads waiting for it,
 * longest waiting first, until one finds no room. A wait is cleared once its thread has a run or
 * nothing left to admit; a thread refused again keeps (and refreshes) its wait.
 */
export async function drainWaiting(deps: Deps, ownerId: string): Promise<number> {
  if (deps.limits.liveRunsPerUser === 0) return 0;
  let admitted = 0;
  for (const wait of await deps.store.ownerWaits(ownerId, WAITS_BATCH)) {
    const thread = await deps.store.getThread(wait._id);
    const drained: Drained = thread && isRecorded(thread) ? await drain(deps, thread) : { kind: 'empty' };
    if (drained.kind === 'full') break;
    if (drained.kind === 'admitted') admitted += 1;
    await deps.store.clearWait(wait);
  }
  return admitted;
}
