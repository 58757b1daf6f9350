import type { ReviewEvidence } from '@threadwork/contracts';
import { notFound } from '@threadwork/platform';
import type { RepohostClient } from '../clients/repohost.js';
import type { RunsClient } from '../clients/runs.js';
import type { ThreadsClient } from '../clients/threads.js';
import { evidence } from '../domain/evidence.js';
import type { SnapshotStore } from '../store/snapshots.js';

export interface ReviewFlowDeps {
  store: SnapshotStore;
  threads: ThreadsClient;
  runs: Pick<RunsClient, 'hasLiveRun'>;
  repohost: RepohostClient;
}

/**
 * review.get: the thread must be the owner's and the project repository one of its project's
 * (asked of threads for that one thread's project, so a foreign or unknown one is `not_found`
 * exactly as threads sees it); then
 * the snapshot, whether a run is live (asked of runs now, which is fresher than any event) and
 * the pull request (asked of repohost, which syncs it when stale).
 */
export async function getReview(
  { store, threads, runs, repohost }: ReviewFlowDeps,
  input: { owner_id: string; thread_id: string; project_repository_id: string },
): Promise<ReviewEvidence> {
  const project = await threads.project(input.owner_id, input.thread_id);
  if (!project.repositories.some((repository) => repository.id === input.project_repository_id)) {
    throw notFound('thread or project repository');
  }
  const [snapshot, live, publication] = await Promise.all([
    store.get(input.owner_id, input.thread_id, input.project_repository_id),
    runs.hasLiveRun(input.owner_id, input.thread_id),
    repohost.publication(input),
  ]);
  return evidence({
    threadId: input.thread_id,
    projectId: project.project_id,
    projectRepositoryId: input.project_repository_id,
    snapshot,
    live,
    publication,
  });
}
