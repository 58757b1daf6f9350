import type {
  CandidateProducedEvent,
  ControlAppliedEvent,
  MessageCompletedEvent,
  Run,
  RunStatusEvent,
  SandboxStatusEvent,
} from '@threadwork/contracts';
import { domainEventDigest, isAppError } from '@threadwork/platform';
import { assistantMessageId } from '../domain/idempotency.js';
import { isRecorded } from '../store/records.js';
import { recordRun } from './admission.js';
import type { Deps } from './deps.js';
import { drainQueue, drainWaiting } from './queue.js';

async function runIfKnown(deps: Deps, ownerId: string, runId: string): Promise<Run | null> {
  try {
    return await deps.peers.getRun(ownerId, runId);
  } catch (err) {
    if (isAppError(err) && err.code === 'not_found') return null;
    throw err;
  }
}

/** What a runner's event says of its run, for the runs service to confirm. */
interface RunnerEventFacts {
  run_id: string;
  thread_id: string;
  owner_id?: string;
  repository?: { project_repository_id: string; repository_id: number };
}

/**
 * Whether a runner's event is one its run's holder published (attested under its claim) and
 * says what the run is: anyone with the runner's NATS key can publish on `evt.runner.>`, so an
 * event the runs service does not confirm is ignored, logged with the run id.
 */
async function confirmed(deps: Deps, subject: string, data: Uint8Array, facts: RunnerEventFacts): Promise<boolean> {
  const answer = await deps.peers.attestation({ ...facts, subject, digest: domainEventDigest(data) });
  if (!answer.confirmed) {
    deps.logger.warn(
      { run_id: facts.run_id, thread_id: facts.thread_id, subject, reason: answer.reason },
      'ignored a runner event its run’s holder did not publish',
    );
  }
  return answer.confirmed;
}

/**
 * A run moved. The thread catches up on the run should the admitter have stopped before recording
 * it (latest run, shown message); a terminal run frees the thread for its oldest pending control,
 * and a place under the owner's live-run limit for threads waiting for one. Idempotent: a second delivery, or a second replica with the same event, records the same run,
 * and draining admits by control id, so the same run comes back instead of a second one.
 */
export async function onRunStatus(deps: Deps, event: RunStatusEvent): Promise<void> {
  const thread = await deps.store.getThread(event.thread_id);
  if (!thread) return;
  if (thread.latest_run_id !== event.run_id) {
    const run = await runIfKnown(deps, thread.owner_id, event.run_id);
    if (run) await recordRun(deps, run);
  }
  await deps.store.showRunMessages(event.run_id);
  if (!event.terminal) return;
  const current = await deps.store.getThread(event.thread_id);
  if (current && isRecorded(current)) await drainQueue(deps, current);
  await drainWaiting(deps, thread.owner_id);
}

/**
 * The runner's view of the thread's sandbox. A status of a run is confirmed like every runner
 * event; the one status of no run, a sandbox stopped after idling, is taken only while the thread
 * has no live run (so a forged one can at most say "stopped" of a sandbox that idles anyway).
 */
export async function onSandboxStatus(
  deps: Deps,
  subject: string,
  data: Uint8Array,
  event: SandboxStatusEvent,
): Promise<void> {
  if (event.run_id) {
    if (!(await confirmed(deps, subject, data, { run_id: event.run_id, thread_id: event.thread_id }))) return;
  } else {
    const thread = await deps.store.getThread(event.thread_id);
    if (!thread) return;
    const idle = event.status === 'stopped' && (await deps.peers.liveRun(thread.owner_id, thread._id)) === null;
    if (!idle) {
      deps.logger.warn(
        { thread_id: event.thread_id, status: event.status },
        'ignored a sandbox status of no run while the thread is busy (or not a stop)',
      );
      return;
    }
  }
  await deps.store.setSandboxStatus(event.thread_id, event.status, new Date(event.at));
}

/** The harness took a steer: pending → applied (a steer that already admitted a run of its own stays as it is). */
export async function onControlApplied(
  deps: Deps,
  subject: string,
  data: Uint8Array,
  event: ControlAppliedEvent,
): Promise<void> {
  const control = await deps.store.getControl(event.control_id);
  // Only the run a steer was sent to applies it.
  if (!control || control.target_run_id !== event.run_id || control.thread_id !== event.thread_id) {
    deps.logger.warn({ run_id: event.run_id, control_id: event.control_id }, 'ignored a steer applied by another run');
    return;
  }
  if (!(await confirmed(deps, subject, data, { run_id: event.run_id, thread_id: event.thread_id }))) return;
  await deps.store.markControlApplied(event.control_id, { createdRunId: null, at: new Date(event.at) });
}

/** The agent's reply, stored once per `message_key`. */
export async function onMessageCompleted(
  deps: Deps,
  subject: string,
  data: Uint8Array,
  event: MessageCompletedEvent,
): Promise<void> {
  const thread = await deps.store.getThread(event.thread_id);
  if (!thread) return;
  if (!(await confirmed(deps, subject, data, { run_id: event.run_id, thread_id: event.thread_id }))) return;
  const messageId = assistantMessageId(event.message_key);
  await deps.store.insertMessageIfAbsent({
    _id: `${thread._id}/${messageId}`,
    thread_id: thread._id,
    message_id: messageId,
    role: 'assistant',
    parts: [{ type: 'text', text: event.text }],
    run_id: event.run_id,
    visible: true,
    created_at: new Date(event.at),
  });
}

/** A run's work on one repository: the work list shows the lines it changed. */
export async function onCandidateProduced(
  deps: Deps,
  subject: string,
  data: Uint8Array,
  event: CandidateProducedEvent,
): Promise<void> {
  const facts = {
    run_id: event.run_id,
    thread_id: event.thread_id,
    owner_id: event.owner_id,
    repository: { project_repository_id: event.project_repository_id, repository_id: event.repository_id },
  };
  if (!(await confirmed(deps, subject, data, facts))) return;
  await deps.store.setCandidateStats(event.thread_id, event.project_repository_id, {
    additions: event.stats.additions,
    deletions: event.stats.deletions,
    at: new Date(event.at),
  });
}
