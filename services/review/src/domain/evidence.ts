import type { DiffStatus, ReviewEvidence, ReviewStats, DiffFile } from '@threadwork/contracts';

// What review answers, decided without I/O from the snapshot and whether a run is live.

/** The latest candidate of one repository of a thread, and the latest failure to produce one. */
export interface Snapshot {
  candidate: {
    runId: string;
    revision: string;
    diff: string;
    truncated: boolean;
    files: DiffFile[];
    stats: ReviewStats;
    at: Date;
  } | null;
  failure: { runId: string; message: string; at: Date } | null;
}

/**
 * `no_sandbox` until a run has produced anything for the repository; `pending` while a run of the
 * thread is live (what is shown is the previous candidate); `error` when the latest run's candidate
 * could not be made (newer than the last good one); `ready` otherwise.
 */
export function diffStatus(snapshot: Snapshot | null, live: boolean): DiffStatus {
  if (!snapshot || (!snapshot.candidate && !snapshot.failure)) return 'no_sandbox';
  if (live) return 'pending';
  const { candidate, failure } = snapshot;
  if (failure && (!candidate || failure.at.getTime() > candidate.at.getTime())) return 'error';
  return 'ready';
}

export function evidence(input: {
  threadId: string;
  projectId: string;
  projectRepositoryId: string;
  snapshot: Snapshot | null;
  live: boolean;
  publication: ReviewEvidence['publication'];
}): ReviewEvidence {
  const candidate = input.snapshot?.candidate ?? null;
  return {
    thread_id: input.threadId,
    project_id: input.projectId,
    project_repository_id: input.projectRepositoryId,
    diff: {
      diff: candidate?.diff ?? '',
      files: candidate?.files ?? [],
      status: diffStatus(input.snapshot, input.live),
      candidate_revision: candidate?.revision ?? '',
      truncated: candidate?.truncated ?? false,
    },
    stats: candidate?.stats ?? { additions: 0, deletions: 0 },
    publication: input.publication,
  };
}
