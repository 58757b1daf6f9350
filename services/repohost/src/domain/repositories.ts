import type { HostedRepository, Repository } from '@threadwork/contracts';
import { notFound } from '@threadwork/platform';

/** `q` matches anywhere in `full_name`, ignoring case; no `q` (or an empty one) keeps everything. */
export function filterRepositories<R extends Repository>(repositories: readonly R[], q: string | undefined): R[] {
  const needle = q?.trim().toLowerCase();
  if (!needle) return [...repositories];
  return repositories.filter((repository) => repository.full_name.toLowerCase().includes(needle));
}

/**
 * The repositories asked for, in the order asked. One the owner cannot see is `not_found`, the
 * same answer as one that does not exist, so an id never reveals another owner's repository.
 */
export function pickRepositories<R extends Repository>(visible: readonly R[], ids: readonly number[]): R[] {
  const byId = new Map(visible.map((repository) => [repository.repository_id, repository]));
  return ids.map((id) => {
    const repository = byId.get(id);
    if (!repository) throw notFound('repository');
    return repository;
  });
}

/** Sorted by full name so lists are stable between calls whatever order the provider reports. */
export function sortRepositories<R extends Repository>(repositories: R[]): R[] {
  return repositories.sort((a, b) => (a.full_name < b.full_name ? -1 : a.full_name > b.full_name ? 1 : 0));
}

/** The public shape: everything but the clone URL, which stays inside the deployment. */
export function publicRepository({ clone_url: _clone, ...repository }: HostedRepository): Repository {
  return repository;
}
