import type {
  ControlSubmission,
  MessageAccepted,
  QueueBody,
  Run,
  SendMessageBody,
  SteerBody,
} from '@threadwork/contracts';
import { conflict } from '@threadwork/platform';
import { messageAdmissionKey, requestHash, requestKey } from '../domain/idempotency.js';
import { newId } from '../domain/ids.js';
import type { ControlRecord, RecordedThread } from '../store/records.js';
import { controlView, runRef } from '../domain/views.js';
import { admitWithMessage, isThreadBusy } from './admission.js';
import type { Deps } from './deps.js';
import { ownedThread } from './owned.js';
import { drainQueue } from './queue.js';
import { checkLiveRuns, withinLimits } from './limits.js';

interface Target {
  owner_id: string;
  thread_id: string;
}

interface MessageIds extends Record<string, string> {
  message_id: string;
  run_id: string;
}

interface ControlIds extends Record<string, string> {
  control_id: string;
  message_id: string;
  run_id: string;
}

/** With a client_request_id, the ids its first use chose (bound to this thread and body); else fresh ones. */
async function requestIds<Ids extends Record<string, string>>(
  { store }: Deps,
  op: 'message' | 'queue' | 'steer',
  { owner_id: ownerId, thread_id: threadId }: Target,
  body: { client_request_id?: string | undefined },
  candidate: Ids,
): Promise<Ids> {
  if (!body.client_request_id) return candidate;
  return store.claimRequest(
    requestKey(ownerId, op, body.client_request_id),
    ownerId,
    requestHash({ thread_id: threadId, body }),
    candidate,
  );
}

/**
 * threads.message: an idle thread admits a new run for the message; an active one answers
 * `thread_busy` (queue or steer instead), and an owner at the live-run limit `too_many_runs`,
 * before anything is written. The runs service decides who holds the thread, so a send that races
 * another admission loses there; its message stays hidden until the sweep removes it
 * (flows/sweep.ts).
 */
export async function sendMessage(deps: Deps, target: Target & { body: SendMessageBody }): Promise<MessageAccepted> {
  const thread = await ownedThread(deps, target.owner_id, target.thread_id, 'thread');
  const { body } = target;
  const key = body.client_request_id ? requestKey(target.owner_id, 'message', body.client_request_id) : null;
  return withinLimits(
    deps,
    thread.owner_id,
    key,
    () => checkLiveRuns(deps, thread.owner_id, thread),
    async () => {
      const ids = await requestIds<MessageIds>(deps, 'message', target, body, {
        message_id: body.message_id ?? newId('msg'),
        run_id: newId('run'),
      });
      let run: Run;
      try {
        run = await admitWithMessage(deps, thread, {
          message_id: ids.message_id,
          run_id: ids.run_id,
          prompt: body.prompt,
          admission_key: messageAdmissionKey(thread._id, ids.message_id),
          collaboration_mode: body.collaboration_mode,
        });
      } catch (err) {
        if (isThreadBusy(err)) throw conflict('thread_busy', 'the thread has an active run; queue or steer instead');
        throw err;
      }
      return { status: 'accepted', ...runRef(run) };
    },
  );
}

function newControl(
  thread: RecordedThread,
  ids: ControlIds,
  fields: Pick<ControlRecord, 'kind' | 'prompt' | 'collaboration_mode' | 'target_run_id'>,
): ControlRecord {
  return {
    _id: ids.control_id,
    owner_id: thread.owner_id,
    thread_id: thread._id,
    status: 'pending',
    prompt_parts: [{ type: 'text', text: fields.prompt }],
    created_run_id: null,
    message_id: ids.message_id,
    run_id: ids.run_id,
    created_at: new Date(),
    applied_at: null,
    ...fields,
  };
}

/** The control as it stands, with the run it admitted (`admitted` when this request saw it happen). */
async function submission(
  deps: Deps,
  thread: RecordedThread,
  controlId: string,
  admitted: { controlId: string; run: Run } | null,
): Promise<ControlSubmission> {
  const control = await deps.store.getControl(controlId);
  if (!control) throw new Error(`control ${controlId} vanished after insert`);
  let run: Run | null = null;
  if (admitted?.controlId === control._id) run = admitted.run;
  else if (control.created_run_id) run = await deps.peers.getRun(thread.owner_id, control.created_run_id);
  return { control: controlView(control, 'thread'), run: run ? runRef(run) : null };
}

/**
 * threads.queue: the control is stored pending first, then the queue is drained: an idle thread
 * admits its oldest pending control at once (normally this one), an active one keeps it until its
 * run ends. Storing before looking closes the gap where the run ends between the look and the
 * write and the run-ended handler finds nothing to admit.
 *
 * Queueing on an idle thread would admit a run at once, so an owner at the live-run limit is
 * refused (`too_many_runs`) before anything is written; behind an active run it is accepted, and
 * should the owner be at the limit when its turn comes it waits pending for room (drainQueue).
 */
export async function queueMessage(deps: Deps, target: Target & { body: QueueBody }): Promise<ControlSubmission> {
  const thread = await ownedThread(deps, target.owner_id, target.thread_id, 'thread');
  const { body } = target;
  // Undefined: not looked up yet (a replay looks only if its control is missing).
  let live: Run | null | undefined;
  const replay =
    body.client_request_id !== undefined &&
    (await deps.store.hasRequest(requestKey(target.owner_id, 'queue', body.client_request_id)));
  if (!replay) {
    live = await deps.peers.liveRun(thread.owner_id, thread._id);
    if (!live) await checkLiveRuns(deps, thread.owner_id);
  }
  const ids = await requestIds<ControlIds>(deps, 'queue', target, body, {
    control_id: newId('ctl'),
    message_id: body.message_id ?? newId('msg'),
    run_id: newId('run'),
  });
  if (!(await deps.store.getControl(ids.control_id))) {
    if (live === undefined) live = await deps.peers.liveRun(thread.owner_id, thread._id);
    await deps.store.insertControlIfAbsent(
      newControl(thread, ids, {
        kind: 'queue',
        prompt: body.prompt,
        collaboration_mode: body.collaboration_mode ?? thread.collaboration_mode,
        target_run_id: live?.id ?? null,
      }),
    );
  }
  const admitted = await drainQueue(deps, thread);
  return submission(deps, thread, ids.control_id, admitted);
}

/**
 * threads.steer: needs a live run. The control is written before the signal goes out, so the
 * state the signal announces is durable (the signal names the control only; its runner reads the
 * text back, threads.steer.read); it turns `applied` when the runner reports the harness took it. Should the run have ended meanwhile, the steer is drained like a queue item.
 */
export async function steerRun(deps: Deps, target: Target & { body: SteerBody }): Promise<ControlSubmission> {
  const thread = await ownedThread(deps, target.owner_id, target.thread_id, 'thread');
  const { body } = target;
  const ids = await requestIds<ControlIds>(deps, 'steer', target, body, {
    control_id: newId('ctl'),
    message_id: newId('msg'),
    run_id: newId('run'),
  });
  let control = await deps.store.getControl(ids.control_id);
  if (!control) {
    const live = await deps.peers.liveRun(thread.owner_id, thread._id);
    if (!live) throw conflict('no_active_run', 'the thread has no active run to steer; send a message instead');
    await deps.store.insertControlIfAbsent(
      newControl(thread, ids, {
        kind: 'steer',
        prompt: body.prompt,
        collaboration_mode: thread.collaboration_mode,
        target_run_id: live.id,
      }),
    );
    control = await deps.store.getControl(ids.control_id);
    if (!control) throw new Error(`control ${ids.control_id} vanished after insert`);
  }
  let admitted: { controlId: string; run: Run } | null = null;
  if (control.status === 'pending' && control.target_run_id) {
    // Also on a retry: the first attempt may have stopped before signalling; the runner takes a
    // control id once.
    deps.peers.signal(control.target_run_id, { type: 'steer', control_id: control._id });
    // Its run may have ended since the look above, and the run-ended handler may have drained the
    // queue before this steer was stored: drain again (a no-op while a run is live). Asked of runs
    // as "is a run live", not "is this run terminal": the live-run answer counts a terminal
    // decision whose run document a racing write still shows live.
    admitted = await drainQueue(deps, thread);
  }
  return submission(deps, thread, control._id, admitted);
}
