import type { CollaborationMode, Run, View } from '@threadwork/contracts';
import { isAppError, notFound, type Logger } from '@threadwork/platform';
import type { SerialByKey } from '../domain/limits.js';
import { isRecorded, type ControlRecord, type RecordedThread, type ThreadRecord } from '../store/records.js';
import type { ThreadsStore } from '../store/store.js';
import { hasRoom, type Limits } from './limits.js';
import type { Peers } from './peers.js';

export interface Deps {
  store: ThreadsStore;
  peers: Peers;
  logger: Logger;
  /** The harnesses the deployment serves (HARNESSES). */
  harnesses: readonly string[];
  limits: Limits;
  /** One admission decision at a time per user on this replica (keyed by owner id). */
  serial: SerialByKey;
}

export function isThreadBusy(err: unknown): boolean {
  return isAppError(err) && err.code === 'thread_busy';
}

/** The caller's thread; another owner's, or one whose creation has not finished, does not exist. */
export async function ownedThread(
  { store }: Pick<Deps, 'store'>,
  ownerId: string,
  threadId: string,
  view: View,
): Promise<RecordedThread> {
  const thread = await store.findOwnedThread(ownerId, threadId);
  if (!thread || !isRecorded(thread)) throw notFound(view);
  return thread;
}

/** The thread's latest run as runs reports it now (a cached status would go stale the moment the run moves). */
export async function latestRun({ peers }: Pick<Deps, 'peers'>, thread: RecordedThread): Promise<Run | null> {
  try {
    return await peers.getRun(thread.owner_id, thread.latest_run_id);
  } catch (err) {
    if (isAppError(err) && err.code === 'not_found') return null;
    throw err;
  }
}

export async function recordRun({ store }: Pick<Deps, 'store'>, run: Run): Promise<void> {
  await store.recordRun(run.thread_id, {
    id: run.id,
    created_at: new Date(run.created_at),
    harness: run.harness,
    model: run.model,
    reasoning_effort: run.reasoning_effort,
    collaboration_mode: run.collaboration_mode,
  });
}

export interface MessageAdmission {
  message_id: string;
  run_id: string;
  prompt: string;
  admission_key: string;
  collaboration_mode?: CollaborationMode | undefined;
}

/**
 * Admits a run for a user message. The message is stored hidden first (so no run ever exists
 * whose message was never written) and shown, with this admission's text and run, once the
 * admission is recorded. A send that loses the thread to another run (`thread_busy`) leaves its
 * message hidden, never deletes it: a twin with the same ids (a retry after a timeout, a second
 * drainer of one control) may be admitting it at that moment, and deleting "if still hidden" is a
 * conditional delete, which FerretDB does not make atomic, so it could remove a message its twin
 * has just shown. Every step is keyed (message by id, run by admission key), so a retry or a
 * concurrent twin with the same ids converges on the same message and run.
 */
export async function admitWithMessage(
  deps: Pick<Deps, 'store' | 'peers'>,
  thread: ThreadRecord,
  input: MessageAdmission,
): Promise<Run> {
  const { store, peers } = deps;
  const messageRecordId = `${thread._id}/${input.message_id}`;
  await store.insertMessageIfAbsent({
    _id: messageRecordId,
    thread_id: thread._id,
    message_id: input.message_id,
    role: 'user',
    parts: [{ type: 'text', text: input.prompt }],
    run_id: input.run_id,
    visible: false,
    created_at: new Date(),
  });
  const run = await peers.admit({
    owner_id: thread.owner_id,
    thread_id: thread._id,
    project_id: thread.project_id,
    message_id: input.message_id,
    admission_key: input.admission_key,
    run_id: input.run_id,
    prompt: input.prompt,
    // Null until the first run is recorded: runs then applies its defaults, and we keep its choice.
    harness: thread.harness ?? undefined,
    model: thread.model ?? undefined,
    reasoning_effort: thread.reasoning_effort ?? undefined,
    collaboration_mode: input.collaboration_mode ?? thread.collaboration_mode ?? undefined,
    repositories: thread.repositories,
  });
  await recordRun(deps, run);
  // Written again on showing: a hidden message left by an earlier send of the same message id
  // that lost the thread carries that send's text, run and time.
  await store.showMessage(messageRecordId, {
    parts: [{ type: 'text', text: input.prompt }],
    run_id: run.id,
    created_at: new Date(),
  });
  return run;
}

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
