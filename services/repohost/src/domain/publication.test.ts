import { describe, expect, it } from 'vitest';
import { checksAggregate, isAlreadyExists, publicationState, pullRequestTitle } from './publication.js';

const check = (status: string, conclusion: string | null = null) => ({ status, conclusion });
const status = (state: string) => ({ state });

describe('checksAggregate', () => {
  it('is none without checks or statuses', () => {
    expect(checksAggregate([], [])).toBe('none');
  });

  it('is pending while anything is queued, running or pending', () => {
    expect(checksAggregate([check('queued')], [])).toBe('pending');
    expect(checksAggregate([check('in_progress'), check('completed', 'success')], [])).toBe('pending');
    expect(checksAggregate([check('completed', 'success')], [status('pending')])).toBe('pending');
  });

  it('is failure when any check or status failed, even with others pending', () => {
    for (const conclusion of ['failure', 'cancelled', 'timed_out', 'action_required']) {
      expect(checksAggregate([check('completed', conclusion), check('queued')], [])).toBe('failure');
    }
    expect(checksAggregate([check('completed', 'success')], [status('error')])).toBe('failure');
    expect(checksAggregate([], [status('failure'), status('pending')])).toBe('failure');
  });

  it('is success when everything finished well (neutral and skipped count as well)', () => {
    expect(
      checksAggregate(
        [check('completed', 'success'), check('completed', 'neutral'), check('completed', 'skipped')],
        [status('success')],
      ),
    ).toBe('success');
  });
});

describe('publicationState', () => {
  it('folds GitHub state, draft and merged into one value', () => {
    expect(publicationState({ state: 'open', draft: false })).toBe('open');
    expect(publicationState({ state: 'open', draft: true })).toBe('draft');
    expect(publicationState({ state: 'closed', merged: false })).toBe('closed');
    expect(publicationState({ state: 'closed', merged: true })).toBe('merged');
    expect(publicationState({ state: 'closed', merged_at: '2025-01-01T00:00:00Z' })).toBe('merged');
  });
});

describe('pull request text', () => {
  it('titles after the thread, or its id', () => {
    expect(pullRequestTitle('  Fix the build ', 'thr_1')).toBe('Fix the build');
    expect(pullRequestTitle(null, 'thr_1')).toBe('Threadwork: thr_1');
    expect(pullRequestTitle('', 'thr_1')).toBe('Threadwork: thr_1');
  });

  it("recognises GitHub's 'already exists' validation error", () => {
    expect(
      isAlreadyExists([{ resource: 'PullRequest', code: 'custom', message: 'A pull request already exists for o:b.' }]),
    ).toBe(true);
    expect(isAlreadyExists([{ resource: 'PullRequest', field: 'head', code: 'invalid' }])).toBe(false);
    expect(isAlreadyExists(undefined)).toBe(false);
  });
});
