import { z } from 'zod';
import { Id, Timestamp } from '../common.js';
import { ChecksAggregate, DiffStatus, PublicationState } from '../values.js';

/** GET /v1/threads/{id}/review */
export const ReviewQuery = z.object({
  project_repository_id: Id,
});
export type ReviewQuery = z.infer<typeof ReviewQuery>;

/** `status` is git's per-file status, passed through, so it stays an open string. */
export const DiffFile = z.object({
  path: z.string(),
  status: z.string(),
});
export type DiffFile = z.infer<typeof DiffFile>;

export const ReviewDiff = z.object({
  diff: z.string(),
  files: z.array(DiffFile),
  status: DiffStatus,
  // Empty while there is no candidate tree yet (`no_sandbox`, `pending`).
  candidate_revision: z.string(),
  truncated: z.boolean(),
});
export type ReviewDiff = z.infer<typeof ReviewDiff>;

export const ReviewStats = z.object({
  additions: z.int().min(0),
  deletions: z.int().min(0),
});
export type ReviewStats = z.infer<typeof ReviewStats>;

// Check and commit-status values come from the provider and are passed through as open strings;
// the provider leaves the nullable ones unset until the check has got that far.
export const PublicationCheck = z.object({
  id: z.int(),
  name: z.string(),
  status: z.string(),
  conclusion: z.string().nullable(),
  detailsUrl: z.string().nullable(),
  startedAt: z.string().nullable(),
  completedAt: z.string().nullable(),
});
export type PublicationCheck = z.infer<typeof PublicationCheck>;

export const PublicationCommitStatus = z.object({
  id: z.int(),
  context: z.string(),
  state: z.string(),
  targetUrl: z.string().nullable(),
});
export type PublicationCommitStatus = z.infer<typeof PublicationCommitStatus>;

/** camelCase, unlike the rest of the API, because the contract names it so. */
export const Publication = z.object({
  projectRepositoryId: Id,
  repository: z.object({
    owner: z.string(),
    name: z.string(),
  }),
  prNumber: z.int().positive(),
  prUrl: z.url(),
  branch: z.string(),
  headSha: z.string(),
  state: PublicationState,
  // The provider reports null while it is still computing mergeability.
  mergeable: z.boolean().nullable(),
  mergeableState: z.string(),
  checks: z.array(PublicationCheck),
  commitStatuses: z.array(PublicationCommitStatus),
  checksAggregate: ChecksAggregate,
  lastSyncedAt: Timestamp,
});
export type Publication = z.infer<typeof Publication>;

/** `publication` is null until a pull request has been opened for the repository. */
export const ReviewEvidence = z.object({
  thread_id: Id,
  project_id: Id,
  project_repository_id: Id,
  diff: ReviewDiff,
  stats: ReviewStats,
  publication: Publication.nullable(),
});
export type ReviewEvidence = z.infer<typeof ReviewEvidence>;
