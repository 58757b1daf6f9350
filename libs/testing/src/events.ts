import type { CandidateProducedEvent } from '@threadwork/contracts';

/** Whose candidate it is: the run, its thread and owner, the repository. */
export type CandidateOf = Pick<
  CandidateProducedEvent,
  'thread_id' | 'run_id' | 'owner_id' | 'project_repository_id' | 'repository_id'
>;

/**
 * A candidate as the runner reports one: CHANGELOG.md added on the thread branch
 * (`threadwork/<thread id>`) over `trunk`, one line, now; `fields` change what a test looks at.
 */
export function candidateProduced(fields: CandidateOf & Partial<CandidateProducedEvent>): CandidateProducedEvent {
  return {
    branch: `threadwork/${fields.thread_id}`,
    base_branch: 'trunk',
    base_revision: 'a'.repeat(40),
    candidate_revision: 'b'.repeat(40),
    diff: 'diff --git a/CHANGELOG.md b/CHANGELOG.md\n',
    truncated: false,
    files: [{ path: 'CHANGELOG.md', status: 'added' }],
    stats: { additions: 1, deletions: 0 },
    at: new Date().toISOString(),
    ...fields,
  };
}
