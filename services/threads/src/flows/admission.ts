import type { CollaborationMode, Run } from '@threadwork/contracts';
import { isAppError } from '@threadwork/platform';
import type { ThreadRecord } from '../store/records.js';
import type { Deps } from './deps.js';

export function isThreadBusy(err: unknown): boolean {
  return isAppError(err) && err.code === 'thread_busy';
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
