import type { HostedRepository } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import {
  baseBranches,
  inRequestedOrder,
  orderedRepositoryIds,
  projectKey,
  projectName,
  projectRepositories,
  runRepositories,
} from './project.js';

function repo(id: number, name: string): HostedRepository {
  return {
    repository_id: id,
    installation_id: 9,
    owner: 'acme',
    name,
    full_name: `acme/${name}`,
    url: `https://git.example/acme/${name}.git`,
    clone_url: `https://git.example/acme/${name}.git`,
    avatar_url: 'https://git.example/acme.png',
    private: true,
    default_branch: 'main',
  };
}

describe('projects', () => {
  it('orders repositories primary first without repeats', () => {
    expect(orderedRepositoryIds({ repository_id: 2, repository_ids: [1, 2, 3, 1] })).toEqual([2, 1, 3]);
    expect(orderedRepositoryIds({ repository_id: 2 })).toEqual([2]);
  });

  it('keys a project by owner and ordered repositories', () => {
    expect(projectKey('usr_1', [2, 1])).toBe('usr_1:2,1');
    expect(projectKey('usr_1', [2, 1])).not.toBe(projectKey('usr_1', [1, 2]));
  });

  it('puts the answer in the order asked and refuses a missing repository', () => {
    const answer = [repo(1, 'lib'), repo(2, 'app')];
    expect(inRequestedOrder([2, 1], answer).map((r) => r.repository_id)).toEqual([2, 1]);
    expect(() => inRequestedOrder([3], answer)).toThrow(/not found/);
  });

  it('applies the requested branch to the primary repository only', () => {
    const repositories = [repo(2, 'app'), repo(1, 'lib')];
    expect(baseBranches(repositories, 'develop')).toEqual(['develop', 'main']);
    expect(baseBranches(repositories, undefined)).toEqual(['main', 'main']);
    expect(projectName(repositories)).toBe('app + lib');
  });

  it('gives the runner clone urls and project repository ids', () => {
    const repositories = [repo(2, 'app'), repo(1, 'lib')];
    let n = 0;
    const members = projectRepositories(repositories, ['develop', 'main'], () => `prr_${++n}`);
    expect(members).toEqual([
      { id: 'prr_1', repository_id: 2, full_name: 'acme/app', branch: 'develop' },
      { id: 'prr_2', repository_id: 1, full_name: 'acme/lib', branch: 'main' },
    ]);
    expect(runRepositories(members, repositories, ['release', 'main'])).toEqual([
      {
        project_repository_id: 'prr_1',
        repository_id: 2,
        full_name: 'acme/app',
        branch: 'release',
        clone_url: 'https://git.example/acme/app.git',
      },
      {
        project_repository_id: 'prr_2',
        repository_id: 1,
        full_name: 'acme/lib',
        branch: 'main',
        clone_url: 'https://git.example/acme/lib.git',
      },
    ]);
  });
});
