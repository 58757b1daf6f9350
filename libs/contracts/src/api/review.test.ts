import { describe, expect, it } from 'vitest';
import { Publication, ReviewEvidence, ReviewQuery } from './review.js';

const publication = {
  projectRepositoryId: 'prp_1',
  repository: { owner: 'acme', name: 'app' },
  prNumber: 12,
  prUrl: 'https://github.com/acme/app/pull/12',
  branch: 'threadwork/thr_1',
  headSha: 'a'.repeat(40),
  state: 'open',
  mergeable: true,
  mergeableState: 'clean',
  checks: [
    {
      id: 1,
      name: 'ci',
      status: 'queued',
      conclusion: null,
      detailsUrl: null,
      startedAt: null,
      completedAt: null,
    },
  ],
  commitStatuses: [{ id: 2, context: 'lint', state: 'error', targetUrl: null }],
  checksAggregate: 'none',
  lastSyncedAt: '2025-05-01T10:00:00Z',
};

const evidence = {
  thread_id: 'thr_1',
  project_id: 'prj_1',
  project_repository_id: 'prp_1',
  diff: {
    diff: 'diff --git a/README.md b/README.md\n',
    files: [{ path: 'README.md', status: 'modified' }],
    status: 'ready',
    candidate_revision: 'b'.repeat(40),
    truncated: false,
  },
  stats: { additions: 1, deletions: 0 },
  publication,
};

describe('ReviewEvidence', () => {
  it('accepts the contract example, with and without a publication', () => {
    expect(ReviewEvidence.parse(evidence)).toEqual(evidence);
    const noSandbox = {
      ...evidence,
      diff: { ...evidence.diff, diff: '', files: [], status: 'no_sandbox', candidate_revision: '' },
      publication: null,
    };
    expect(ReviewEvidence.parse(noSandbox)).toEqual(noSandbox);
  });

  it('rejects unknown diff statuses and negative stats', () => {
    expect(ReviewEvidence.safeParse({ ...evidence, diff: { ...evidence.diff, status: 'done' } }).success).toBe(false);
    expect(ReviewEvidence.safeParse({ ...evidence, stats: { additions: -1, deletions: 0 } }).success).toBe(false);
  });
});

describe('Publication', () => {
  it('rejects unknown states and aggregates and a non-URI prUrl', () => {
    expect(Publication.safeParse({ ...publication, state: 'reopened' }).success).toBe(false);
    expect(Publication.safeParse({ ...publication, checksAggregate: 'mixed' }).success).toBe(false);
    expect(Publication.safeParse({ ...publication, prUrl: 'pull 12' }).success).toBe(false);
  });

  it('requires nullable check fields to be present', () => {
    const [check] = publication.checks;
    const { conclusion: _conclusion, ...withoutConclusion } = check!;
    expect(Publication.safeParse({ ...publication, checks: [withoutConclusion] }).success).toBe(false);
  });
});

describe('ReviewQuery', () => {
  it('requires project_repository_id of 1..256', () => {
    expect(ReviewQuery.parse({ project_repository_id: 'prp_1' })).toEqual({ project_repository_id: 'prp_1' });
    expect(ReviewQuery.safeParse({}).success).toBe(false);
    expect(ReviewQuery.safeParse({ project_repository_id: '' }).success).toBe(false);
    expect(ReviewQuery.safeParse({ project_repository_id: 'p'.repeat(257) }).success).toBe(false);
  });
});
