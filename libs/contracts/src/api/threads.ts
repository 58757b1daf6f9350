import { z } from 'zod';
import { BranchName, Cursor, Id, Prompt, Timestamp, optionalQueryParam, pageLimit } from '../common.js';
import { CollaborationMode, SandboxStatus, TaskStatus, ThreadStatus } from '../values.js';
import { Message } from './messages.js';
import { RunRef } from './runs.js';
import { LatestRun } from './work.js';

/** The contract leaves required-ness open; we always send every field, null where it has no value. */
export const Thread = z.object({
  id: Id,
  project_id: Id,
  name: z.string().nullable(),
  status: ThreadStatus,
  sandbox_status: SandboxStatus.nullable(),
  repohost_url: z.string().nullable(),
  branch: z.string().nullable(),
  harness: Id,
  model: Id,
  reasoning_effort: Id,
  collaboration_mode: CollaborationMode,
  // Not in the contract's table (so optional here, and the contract's example still parses); this
  // gateway always sends it, like the work list's: where a client follows the thread's current run.
  latest_run: LatestRun.nullable()
    .optional()
    .describe("The thread's newest run and its status, null before the first; always sent by this gateway"),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Thread = z.infer<typeof Thread>;

/** POST /v1/threads */
export const ThreadWithRun = z.object({
  ...Thread.shape,
  ...RunRef.shape,
});
export type ThreadWithRun = z.infer<typeof ThreadWithRun>;

/**
 * The task vocabulary's view of a thread. Optional fields follow the contract's "Required" column;
 * the task record has no harness, model, reasoning effort or collaboration mode.
 */
export const Task = z.object({
  id: Id,
  project_id: Id,
  name: z.string().nullable().optional(),
  status: TaskStatus,
  sandbox_status: SandboxStatus.nullable().optional(),
  repohost_url: z.string().nullable().optional(),
  branch: z.string().nullable().optional(),
  // The first page of the thread's messages.
  messages: z.array(Message).optional(),
  created_at: Timestamp,
  updated_at: Timestamp.optional(),
});
export type Task = z.infer<typeof Task>;

/** POST /v1/tasks */
export const TaskWithRun = z.object({
  ...Task.shape,
  ...RunRef.shape,
});
export type TaskWithRun = z.infer<typeof TaskWithRun>;

/**
 * GET /v1/tasks, newest first. `next_cursor` (not in the contract's table, so optional there;
 * always sent) continues the list, null on its last page.
 */
export const TaskList = z.object({
  tasks: z.array(Task),
  next_cursor: Cursor.nullable().optional(),
});
export type TaskList = z.infer<typeof TaskList>;

/**
 * Threads per page of GET /v1/tasks and GET /v1/work. A page also ends early once what it holds
 * reaches THREAD_PAGE_BYTES_MAX, so it always fits in one NATS message (max_payload, 1 MiB by
 * default) whatever its threads carry (a work thread carries its first prompt).
 */
export const THREAD_PAGE_LIMIT_DEFAULT = 50;
export const THREAD_PAGE_LIMIT_MAX = 200;
export const THREAD_PAGE_BYTES_MAX = 512 * 1024;

/** GET /v1/tasks and GET /v1/work: optional, so a caller that sends neither gets the first page. */
export const ThreadPageQuery = z.object({
  cursor: optionalQueryParam(Cursor.optional()),
  limit: pageLimit({ defaultValue: THREAD_PAGE_LIMIT_DEFAULT, max: THREAD_PAGE_LIMIT_MAX }),
});
export type ThreadPageQuery = z.infer<typeof ThreadPageQuery>;

/** GET /v1/tasks/{id}/runs/resumable when an active run exists (204 with no body otherwise). */
export const ResumableRun = z.object({
  run_id: Id,
});
export type ResumableRun = z.infer<typeof ResumableRun>;

/** POST /v1/tasks — the contract allows no other properties. */
export const CreateTaskBody = z.strictObject({
  repository_id: z.int().positive(),
  prompt: Prompt,
  model: Id.optional(),
  harness: Id.optional(),
  reasoning_effort: Id.optional(),
  client_request_id: Id.optional(),
  message_id: Id.optional(),
});
export type CreateTaskBody = z.infer<typeof CreateTaskBody>;

export const REPOSITORY_IDS_MAX = 10;

/** POST /v1/threads — DESIGN.md section 4; no other properties. */
export const CreateThreadBody = z.strictObject({
  // The primary repository.
  repository_id: z.int().positive(),
  prompt: Prompt,
  // Further workspace repositories; bounded because each one is cloned into the sandbox.
  repository_ids: z.array(z.int().positive()).max(REPOSITORY_IDS_MAX).optional(),
  model: Id.optional(),
  harness: Id.optional(),
  reasoning_effort: Id.optional(),
  collaboration_mode: CollaborationMode.optional(),
  name: Id.optional(),
  // Base branch; the repository's default branch when absent.
  branch: BranchName.optional(),
  client_request_id: Id.optional(),
  message_id: Id.optional(),
});
export type CreateThreadBody = z.infer<typeof CreateThreadBody>;
