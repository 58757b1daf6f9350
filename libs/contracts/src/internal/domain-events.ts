import { z } from 'zod';
import { DiffFile, ReviewStats } from '../api/review.js';
import { RunError } from '../api/runs.js';
import { Id, JsonValue, Timestamp } from '../common.js';
import { defineEvent } from '../rpc.js';
import { subjects } from '../subjects.js';
import { RunStatus, SandboxStatus } from '../values.js';

const OwnerId = Id;

// ---------------------------------------------------------------------------------------------
// DOMAIN events (`evt.<service>.<entity>.<verb>`), Nats-Msg-Id given per event. A runner's event
// about a run counts only once the runs service confirms its holder published it
// (`runs.attest` before publishing, `runs.attestation` before acting on it): NATS lets any
// holder of the runner's key publish on `evt.runner.>`.

export const RunStatusEvent = z.object({
  run_id: Id,
  thread_id: Id,
  owner_id: OwnerId,
  status: RunStatus,
  previous: RunStatus.nullable(),
  terminal: z.boolean(),
  attempt: z.int().min(0),
  error: RunError.nullable(),
  at: Timestamp,
});
export type RunStatusEvent = z.infer<typeof RunStatusEvent>;

export const SandboxStatusEvent = z.object({
  thread_id: Id,
  /**
   * The run the sandbox was prepared for (its holder attested the event); null for a status of no
   * run: a sandbox stopped after idling.
   */
  run_id: Id.nullable().default(null),
  status: SandboxStatus,
  sandbox_id: Id.nullable(),
  reason: z.string().nullable(),
  at: Timestamp,
});
export type SandboxStatusEvent = z.infer<typeof SandboxStatusEvent>;

export const ControlAppliedEvent = z.object({ control_id: Id, run_id: Id, thread_id: Id, at: Timestamp });
export type ControlAppliedEvent = z.infer<typeof ControlAppliedEvent>;

export const MessageCompletedEvent = z.object({
  thread_id: Id,
  run_id: Id,
  /** Stable per reply, so a redelivered event stores one message. */
  message_key: Id,
  text: z.string(),
  at: Timestamp,
});
export type MessageCompletedEvent = z.infer<typeof MessageCompletedEvent>;

/** One event per project repository after each run (Nats-Msg-Id `${run_id}:${project_repository_id}`). */
export const CandidateProducedEvent = z.object({
  thread_id: Id,
  run_id: Id,
  owner_id: OwnerId,
  project_repository_id: Id,
  repository_id: z.int().positive(),
  /** The thread branch (`threadwork/<thread id>`) the revision is on. */
  branch: z.string().min(1),
  base_branch: z.string().min(1),
  base_revision: z.string().min(1),
  candidate_revision: z.string().min(1),
  /** Unified diff of base..candidate, cut at the runner's byte bound. */
  diff: z.string(),
  truncated: z.boolean(),
  files: z.array(DiffFile),
  stats: ReviewStats,
  at: Timestamp,
});
export type CandidateProducedEvent = z.infer<typeof CandidateProducedEvent>;

/** One event per project repository whose candidate failed (Nats-Msg-Id `${run_id}:${project_repository_id}:failed`). */
export const CandidateFailedEvent = z.object({
  thread_id: Id,
  run_id: Id,
  owner_id: OwnerId,
  project_repository_id: Id,
  repository_id: z.int().positive(),
  message: z.string().max(4096),
  at: Timestamp,
});
export type CandidateFailedEvent = z.infer<typeof CandidateFailedEvent>;

/** A verified provider webhook (Nats-Msg-Id = the delivery id), processed asynchronously by repohost. */
export const WebhookReceivedEvent = z.object({
  delivery: Id,
  event: z.string().min(1).max(256),
  payload: z.record(z.string(), JsonValue),
  received_at: Timestamp,
});
export type WebhookReceivedEvent = z.infer<typeof WebhookReceivedEvent>;

/** Every DOMAIN event, by name: its subject and the schema its publisher and its consumers share. */
export const domainEvents = {
  /** Every run transition; `terminal` ones free the thread for its next run. */
  runStatus: defineEvent(subjects.domain('runs', 'run', 'status'), RunStatusEvent),
  /** The runner's view of a thread's workspace. */
  sandboxStatus: defineEvent(subjects.domain('runner', 'sandbox', 'status'), SandboxStatusEvent),
  /** A steer the harness accepted. */
  controlApplied: defineEvent(subjects.domain('runner', 'control', 'applied'), ControlAppliedEvent),
  /** The agent's reply at the end of a turn, stored as an assistant message. */
  messageCompleted: defineEvent(subjects.domain('runner', 'message', 'completed'), MessageCompletedEvent),
  /** A run's work committed on the thread branch: the candidate revision with its bounded diff. */
  candidateProduced: defineEvent(subjects.domain('runner', 'candidate', 'produced'), CandidateProducedEvent),
  /** A run's candidate could not be committed or diffed; review shows `diff.status: error`. */
  candidateFailed: defineEvent(subjects.domain('runner', 'candidate', 'failed'), CandidateFailedEvent),
  /** A provider webhook whose signature checked out, queued for repohost's own consumer. */
  webhookReceived: defineEvent(subjects.domain('repohost', 'webhook', 'received'), WebhookReceivedEvent),
} as const;
