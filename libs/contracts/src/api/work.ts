import { z } from 'zod';
import { Cursor, Id, Timestamp } from '../common.js';
import { CollaborationMode, RunStatus, SandboxStatus, ThreadStatus } from '../values.js';

/** `id` is the `project_repository_id` that review takes. */
export const ProjectRepository = z.object({
  id: Id,
  repository_id: z.int().positive(),
  full_name: z.string().min(1),
  branch: z.string().min(1),
});
export type ProjectRepository = z.infer<typeof ProjectRepository>;

export const LatestRun = z.object({
  id: Id,
  status: RunStatus,
});
export type LatestRun = z.infer<typeof LatestRun>;

/**
 * Required-ness follows the contract's table. `sandbox_status` has no null there, so it is left
 * out until the first run is picked up rather than sent as null.
 */
export const WorkThread = z.object({
  id: Id,
  project_id: Id.optional(),
  status: ThreadStatus,
  prompt: z.string().nullable(),
  harness: Id,
  model: Id,
  reasoning_effort: Id.optional(),
  collaboration_mode: CollaborationMode.optional(),
  sandbox_status: SandboxStatus.optional(),
  additions: z.int().min(0).optional(),
  deletions: z.int().min(0).optional(),
  latest_run: LatestRun.nullable(),
  created_at: Timestamp.optional(),
  updated_at: Timestamp.optional(),
});
export type WorkThread = z.infer<typeof WorkThread>;

/** The primary repository comes first in `repositories`. */
export const Project = z.object({
  id: Id,
  name: z.string(),
  repository: z.string(),
  branch: z.string(),
  repositories: z.array(ProjectRepository),
  threads: z.array(WorkThread),
});
export type Project = z.infer<typeof Project>;

/**
 * GET /v1/work: a page of the caller's threads, newest first, under their projects (a project is
 * listed on each page that holds one of its threads, with that page's threads). `next_cursor`
 * (optional in the schema since the contract does not show it; always sent) continues the list,
 * null on its last page.
 */
export const WorkList = z.object({
  projects: z.array(Project),
  next_cursor: Cursor.nullable().optional(),
});
export type WorkList = z.infer<typeof WorkList>;
