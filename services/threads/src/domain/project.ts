import type {
  CreateThreadBody,
  HostedRepository,
  ProjectRepository,
  Repository,
  RunRepository,
} from '@threadwork/contracts';
import { notFound } from '@threadwork/platform';

/** The repositories a thread works on, primary first; a repeated id is one repository, not two clones. */
export function orderedRepositoryIds(body: Pick<CreateThreadBody, 'repository_id' | 'repository_ids'>): number[] {
  return [...new Set([body.repository_id, ...(body.repository_ids ?? [])])];
}

/**
 * A project is an owner's ordered set of repositories: the same set (same primary) reuses the
 * project, so its threads show together in the work list. Unique in the projects collection.
 */
export function projectKey(ownerId: string, repositoryIds: readonly number[]): string {
  return `${ownerId}:${repositoryIds.join(',')}`;
}

/**
 * The access answer in the order asked. Repohost promises that order and answers `not_found` for
 * any repository the owner cannot see; checking again here keeps a wrong answer from becoming a
 * project with the wrong primary.
 */
export function inRequestedOrder<R extends Repository>(repositoryIds: readonly number[], answer: readonly R[]): R[] {
  return repositoryIds.map((id) => {
    const repository = answer.find((candidate) => candidate.repository_id === id);
    if (!repository) throw notFound('repository');
    return repository;
  });
}

export function projectName(repositories: readonly Repository[]): string {
  return repositories.map((repository) => repository.name).join(' + ');
}

/**
 * The base branch of each repository in a new thread: the body's `branch` names a branch of the
 * primary repository (the other repositories need not have one of that name), the rest start from
 * their default branch.
 */
export function baseBranches(repositories: readonly Repository[], branch: string | undefined): string[] {
  return repositories.map((repository, index) =>
    index === 0 && branch !== undefined ? branch : repository.default_branch,
  );
}

export function projectRepositories(
  repositories: readonly Repository[],
  branches: readonly string[],
  mintId: () => string,
): ProjectRepository[] {
  return repositories.map((repository, index) => ({
    id: mintId(),
    repository_id: repository.repository_id,
    full_name: repository.full_name,
    branch: branches[index] ?? repository.default_branch,
  }));
}

/** What the runner clones for a thread: the project's repository ids with this thread's base branches. */
export function runRepositories(
  project: readonly ProjectRepository[],
  repositories: readonly HostedRepository[],
  branches: readonly string[],
): RunRepository[] {
  return repositories.map((repository, index) => {
    const member = project.find((candidate) => candidate.repository_id === repository.repository_id);
    if (!member) throw new Error(`project has no repository ${repository.repository_id}`);
    return {
      project_repository_id: member.id,
      repository_id: repository.repository_id,
      full_name: repository.full_name,
      branch: branches[index] ?? repository.default_branch,
      clone_url: repository.clone_url,
    };
  });
}
