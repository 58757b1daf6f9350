import { ReviewEvidence } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import { diffStatus, evidence, type Snapshot } from './evidence.js';

const at = (s: number) => new Date(Date.UTC(2025, 0, 1, 0, 0, s));
const candidate = (s: number): NonNullable<Snapshot['candidate']> => ({
  runId: `run_${s}`,
  revision: 'a'.repeat(40),
  diff: 'diff --git a/x b/x\n',
  truncated: false,
  files: [{ path: 'x', status: 'modified' }],
  stats: { additions: 2, deletions: 1 },
  at: at(s),
});
const failure = (s: number) => ({ runId: `run_${s}`, message: 'commit failed', at: at(s) });

describe('diffStatus', () => {
  it('is no_sandbox until something was produced, live or not', () => {
    expect(diffStatus(null, false)).toBe('no_sandbox');
    expect(diffStatus(null, true)).toBe('no_sandbox');
    expect(diffStatus({ candidate: null, failure: null }, true)).toBe('no_sandbox');
  });

  it('is pending while a run is live, ready after', () => {
    expect(diffStatus({ candidate: candidate(1), failure: null }, true)).toBe('pending');
    expect(diffStatus({ candidate: candidate(1), failure: null }, false)).toBe('ready');
  });

  it('is error when the newest outcome is a failure', () => {
    expect(diffStatus({ candidate: null, failure: failure(1) }, false)).toBe('error');
    expect(diffStatus({ candidate: candidate(1), failure: failure(2) }, false)).toBe('error');
    expect(diffStatus({ candidate: candidate(3), failure: failure(2) }, false)).toBe('ready');
    expect(diffStatus({ candidate: candidate(1), failure: failure(2) }, true)).toBe('pending');
  });
});

describe('evidence', () => {
  it('is a contract ReviewEvidence with or without a candidate', () => {
    const empty = evidence({
      threadId: 'thr_1',
      projectId: 'prj_1',
      projectRepositoryId: 'prr_a',
      snapshot: null,
      live: false,
      publication: null,
    });
    expect(ReviewEvidence.parse(empty)).toEqual({
      thread_id: 'thr_1',
      project_id: 'prj_1',
      project_repository_id: 'prr_a',
      diff: { diff: '', files: [], status: 'no_sandbox', candidate_revision: '', truncated: false },
      stats: { additions: 0, deletions: 0 },
      publication: null,
    });
    const full = evidence({
      threadId: 'thr_1',
      projectId: 'prj_1',
      projectRepositoryId: 'prr_a',
      snapshot: { candidate: { ...candidate(1), truncated: true }, failure: null },
      live: false,
      publication: null,
    });
    expect(ReviewEvidence.parse(full).diff).toMatchObject({
      status: 'ready',
      truncated: true,
      candidate_revision: 'a'.repeat(40),
    });
    expect(full.stats).toEqual({ additions: 2, deletions: 1 });
  });
});
