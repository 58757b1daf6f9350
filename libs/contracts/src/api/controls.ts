import { z } from 'zod';
import { Id, Prompt, Timestamp, optionalQueryParam } from '../common.js';
import { CollaborationMode, ControlKind, ControlStatus } from '../values.js';
import { TextPart } from './messages.js';
import { RunRef } from './runs.js';

const runControlFields = {
  id: Id,
  kind: ControlKind,
  status: ControlStatus,
  prompt: z.string(),
  prompt_parts: z.array(TextPart),
  collaboration_mode: CollaborationMode,
  target_run_id: Id.nullable(),
  // Set when the control admitted a run: a queue applied while idle, or a steer that outlived its run.
  created_run_id: Id.nullable(),
  created_at: Timestamp,
  applied_at: Timestamp.nullable(),
};

export const RunControl = z.object({
  ...runControlFields,
  thread_id: Id,
});
export type RunControl = z.infer<typeof RunControl>;

/** The contract's task vocabulary names the owner `task_id`; served by GET /v1/tasks/{id}/controls. */
export const TaskRunControl = z.object({
  ...runControlFields,
  task_id: Id,
});
export type TaskRunControl = z.infer<typeof TaskRunControl>;

/** `run` is set only when the control admitted a run at once (queue while idle); null otherwise. */
export const ControlSubmission = z.object({
  control: RunControl,
  run: RunRef.nullable(),
});
export type ControlSubmission = z.infer<typeof ControlSubmission>;

/** GET /v1/threads/{id}/controls */
export const ControlList = z.object({
  controls: z.array(RunControl),
});
export type ControlList = z.infer<typeof ControlList>;

/** GET /v1/tasks/{id}/controls */
export const TaskControlList = z.object({
  controls: z.array(TaskRunControl),
});
export type TaskControlList = z.infer<typeof TaskControlList>;

export const ControlListQuery = z.object({
  status: optionalQueryParam(ControlStatus.optional()),
});
export type ControlListQuery = z.infer<typeof ControlListQuery>;

/**
 * POST /v1/threads/{id}/queue. The contract lists `client_request_id` and `message_id` without
 * saying they are required; both are optional (as on every other body) because the service can
 * mint a message id, and a caller that does not retry needs no idempotency key.
 */
export const QueueBody = z.strictObject({
  prompt: Prompt,
  client_request_id: Id.optional(),
  message_id: Id.optional(),
  collaboration_mode: CollaborationMode.optional(),
});
export type QueueBody = z.infer<typeof QueueBody>;

/** POST /v1/threads/{id}/steer — optional `client_request_id` for the same reason as on queue. */
export const SteerBody = z.strictObject({
  prompt: Prompt,
  client_request_id: Id.optional(),
});
export type SteerBody = z.infer<typeof SteerBody>;
