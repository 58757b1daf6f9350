import {
  CandidateProducedEvent,
  ControlAppliedEvent,
  MessageCompletedEvent,
  RunStatusEvent,
  SandboxStatusEvent,
  DOMAIN_INTERESTS,
  type Run,
} from '@threadwork/contracts';
import { describeZodError, invalidRequest, isAppError } from '@threadwork/platform';
import type { z } from 'zod';
import { assistantMessageId } from '../domain/ids.js';
import { isRecorded } from '../domain/records.js';
import { drainQueue, drainWaiting, recordRun, type Deps } from './admission.js';

/** The DOMAIN subjects threads reacts to: the filter of its durable consumer (consumers.ts). */
const SUBJECTS = DOMAIN_INTERESTS.threads;

function parse<S extends z.ZodType>(schema: S, payload: unknown): z.output<S> {
  const parsed = schema.safeParse(payload);
  // Not retryable: the same bytes will never parse, so the consumer terminates the message.
  if (!parsed.success) throw invalidRequest(describeZodError(parsed.error));
  return parsed.data;
}

async function runIfKnown(deps: Deps, ownerId: string, runId: string): Promise<Run | null> {
  try {
    return await deps.peers.getRun(ownerId, runId);
  } catch (err) {
    if (isAppError(err) && err.code === 'not_found') return null;
    throw err;
  }
}

/**
 * A run moved. The thread catches up on the run should the admitter have stopped before recording
 * it (latest run, shown message); a terminal run frees the thread for its oldest pending control,
 * and a place under the owner's live-run limit for threads waiting for one. Idempotent: a second delivery, or a second replica with the same event, records the same run,
 * and draining admits by control id, so the same run comes back instead of a second one.
 */
async function onRunStatus(deps: Deps, event: RunStatusEvent): Promise<void> {
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

async function onSandboxStatus(deps: Deps, event: SandboxStatusEvent): Promise<void> {
  await deps.store.setSandboxStatus(event.thread_id, event.status, new Date(event.at));
}

/** The harness took a steer: pending → applied (a steer that already admitted a run of its own stays as it is). */
async function onControlApplied(deps: Deps, event: ControlAppliedEvent): Promise<void> {
  await deps.store.markControlApplied(event.control_id, { createdRunId: null, at: new Date(event.at) });
}

/** The agent's reply, stored once per `message_key`. */
async function onMessageCompleted(deps: Deps, event: MessageCompletedEvent): Promise<void> {
  const thread = await deps.store.getThread(event.thread_id);
  if (!thread) return;
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
async function onCandidateProduced(deps: Deps, event: CandidateProducedEvent): Promise<void> {
  await deps.store.setCandidateStats(event.thread_id, event.project_repository_id, {
    additions: event.stats.additions,
    deletions: event.stats.deletions,
    at: new Date(event.at),
  });
}

/** Handles one DOMAIN event by subject; anything else on the stream is not for threads. */
export function createDomainHandler(deps: Deps): (subject: string, payload: unknown) => Promise<void> {
  return async (subject, payload) => {
    switch (subject) {
      case SUBJECTS.runStatus:
        return onRunStatus(deps, parse(RunStatusEvent, payload));
      case SUBJECTS.sandboxStatus:
        return onSandboxStatus(deps, parse(SandboxStatusEvent, payload));
      case SUBJECTS.controlApplied:
        return onControlApplied(deps, parse(ControlAppliedEvent, payload));
      case SUBJECTS.messageCompleted:
        return onMessageCompleted(deps, parse(MessageCompletedEvent, payload));
      case SUBJECTS.candidateProduced:
        return onCandidateProduced(deps, parse(CandidateProducedEvent, payload));
      default:
        deps.logger.debug({ subject }, 'ignoring DOMAIN event');
    }
  };
}
