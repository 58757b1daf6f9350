import type { HostedRepository } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import { LOCAL_FOLDER_NOTE, localConnection } from '../domain/local.js';
import { sortRepositories } from '../domain/repositories.js';
import type { GitHubProvider } from './github/provider.js';
import type { RepositoryProvider } from './provider.js';

/** Where a visible repository comes from: it decides credentials and publication. */
export type Source = 'local' | 'github';

export interface SourcedRepository {
  repository: HostedRepository;
  source: Source;
}

export interface CombinedProvider extends RepositoryProvider {
  sourced(ownerId: string): Promise<SourcedRepository[]>;
}

/**
 * The providers a deployment has, as one: the `local` folder always, and the GitHub App when one
 * is configured. With both, GitHub decides the connection status (it is the one a user connects)
 * and the local folder, when it has repositories, shows as one more installation.
 */
export function combineProviders(deps: {
  local: RepositoryProvider;
  github: GitHubProvider | null;
  logger: Logger;
}): CombinedProvider {
  const { local, github, logger } = deps;
  const reported = new Set<number>();

  async function sourced(ownerId: string): Promise<SourcedRepository[]> {
    const locals = await local.repositories(ownerId);
    if (!github) return locals.map((repository) => ({ repository, source: 'local' }));
    const remote = await github.repositories(ownerId);
    const taken = new Set(remote.map((repository) => repository.repository_id));
    const merged: SourcedRepository[] = remote.map((repository) => ({ repository, source: 'github' }));
    for (const repository of locals) {
      if (taken.has(repository.repository_id)) {
        // A local id is a hash of the name: it can, rarely, be a GitHub repository's id as well.
        if (!reported.has(repository.repository_id)) {
          reported.add(repository.repository_id);
          logger.error(
            { full_name: repository.full_name, repository_id: repository.repository_id },
            `local repository ${repository.full_name} is not listed: a GitHub repository has its id; rename it`,
          );
        }
        continue;
      }
      merged.push({ repository, source: 'local' });
    }
    return merged;
  }

  return {
    name: github ? 'github+local' : local.name,
    sourced,

    async connection(ownerId) {
      if (!github) return local.connection(ownerId);
      const connection = await github.connection(ownerId);
      const locals = await local.repositories(ownerId);
      if (locals.length === 0) return connection;
      const [folder] = localConnection().installations;
      const note = `Also: ${LOCAL_FOLDER_NOTE.charAt(0).toLowerCase()}${LOCAL_FOLDER_NOTE.slice(1)}`;
      return {
        ...connection,
        message: connection.message ? `${connection.message}. ${note}` : note,
        installations: folder ? [...connection.installations, folder] : connection.installations,
      };
    },

    async repositories(ownerId) {
      return sortRepositories((await sourced(ownerId)).map(({ repository }) => repository));
    },
  };
}
