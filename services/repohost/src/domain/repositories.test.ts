import type { Repository } from '@threadwork/contracts';
import { AppError } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { filterRepositories, pickRepositories, sortRepositories } from './repositories.js';

const repo = (id: number, fullName: string): Repository => ({
  repository_id: id,
  installation_id: 1,
  owner: fullName.split('/')[0] ?? '',
  name: fullName.split('/')[1] ?? '',
  full_name: fullName,
  url: `file:///r/${id}.git`,
  avatar_url: 'data:image/svg+xml,x',
  private: true,
  default_branch: 'main',
});

const all = [repo(1, 'local/Alpha'), repo(2, 'local/beta'), repo(3, 'acme/alphabet')];

describe('filterRepositories', () => {
  it('keeps everything without a query', () => {
    expect(filterRepositories(all, undefined)).toEqual(all);
    expect(filterRepositories(all, '  ')).toEqual(all);
  });

  it('matches full_name anywhere, ignoring case', () => {
    expect(filterRepositories(all, 'ALPHA').map((r) => r.repository_id)).toEqual([1, 3]);
    expect(filterRepositories(all, 'local/b').map((r) => r.repository_id)).toEqual([2]);
    expect(filterRepositories(all, 'nothing')).toEqual([]);
  });
});

describe('pickRepositories', () => {
  it('answers in the order asked', () => {
    expect(pickRepositories(all, [3, 1]).map((r) => r.repository_id)).toEqual([3, 1]);
  });

  it('is not_found when any one is missing', () => {
    const err = (() => {
      try {
        pickRepositories(all, [1, 99]);
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('not_found');
  });
});

describe('sortRepositories', () => {
  it('orders by full name', () => {
    expect(sortRepositories([...all]).map((r) => r.full_name)).toEqual(['acme/alphabet', 'local/Alpha', 'local/beta']);
  });
});
