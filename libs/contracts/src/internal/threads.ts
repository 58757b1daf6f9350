import { z } from 'zod';
import { QueueBody, SteerBody } from '../api/controls.js';
import { SendMessageBody } from '../api/messages.js';
import { CreateThreadBody, ResumableRun, THREAD_PAGE_LIMIT_DEFAULT, THREAD_PAGE_LIMIT_MAX } from '../api/threads.js';
import { ProjectRepository } from '../api/work.js';
import { Cursor, Id, Prompt } from '../common.js';
import { ControlStatus } from '../values.js';
import { ClaimId } from './runs.js';

const OwnerId = Id;
/** Which vocabulary a response is shaped for: `/v1/threads…` or `/v1/tasks…`. */
export const View = z.enum(['thread', 'task']);
export type View = z.infer<typeof View>;

// ---------------------------------------------------------------------------------------------
// threads

export const CreateRequest = z.object({ owner_id: OwnerId, view: View, body: CreateThreadBody });
export const ThreadGetRequest = z.object({ owner_id: OwnerId, thread_id: Id, view: View });
/** A page of the owner's threads, newest first (GET /v1/tasks and GET /v1/work). */
export const ThreadPageRequest = z.object({
  owner_id: OwnerId,
  cursor: Cursor.optional(),
  limit: z.int().min(1).max(THREAD_PAGE_LIMIT_MAX).default(THREAD_PAGE_LIMIT_DEFAULT),
});
export const OwnerRequest = z.object({ owner_id: OwnerId });
/** The project of one of the owner's threads, with its repositories (what review checks a request against). */
export const ThreadProjectRequest = z.object({ owner_id: OwnerId, thread_id: Id });
export const ThreadProject = z.object({ thread_id: Id, project_id: Id, repositories: z.array(ProjectRepository) });
export type ThreadProject = z.infer<typeof ThreadProject>;
export const ThreadMessageRequest = z.object({ owner_id: OwnerId, thread_id: Id, body: SendMessageBody });
export const ThreadQueueRequest = z.object({ owner_id: OwnerId, thread_id: Id, body: QueueBody });
export const ThreadSteerRequest = z.object({ owner_id: OwnerId, thread_id: Id, body: SteerBody });
export const ThreadMessagesRequest = z.object({
  owner_id: OwnerId,
  thread_id: Id,
  cursor: Cursor.optional(),
  limit: z.int().min(1).max(200),
});
export const ThreadControlsRequest = z.object({
  owner_id: OwnerId,
  thread_id: Id,
  view: View,
  status: ControlStatus.optional(),
});
export const ResumableResponse = z.object({ run: ResumableRun.nullable() });
/**
 * Internal only (the runner; never through the gateway): a steer the runner was signalled, read
 * back from the threads service before the harness gets it, by the holder of the run it targets
 * (its claim id, checked with the runs service). `not_found` for a control that is not a steer of
 * that run; `already_settled` for one no longer pending (applied, or queued after its run).
 */
export const SteerReadRequest = z.object({ run_id: Id, claim_id: ClaimId, control_id: Id });
export const SteerRead = z.object({ control_id: Id, prompt: Prompt });
