import { rpc } from '@threadwork/contracts';
import { route, type RpcRoute } from '@threadwork/platform';
import { filterRepositories, pickRepositories } from '../domain/repositories.js';
import type { RepositoryProvider } from '../providers/provider.js';

export function repohostRoutes(provider: RepositoryProvider): RpcRoute[] {
  return [
    route(rpc.repohost.connection, ({ owner_id }) => provider.connection(owner_id)),
    route(rpc.repohost.repositories, async ({ owner_id, q }) => ({
      repositories: filterRepositories(await provider.repositories(owner_id), q),
    })),
    route(rpc.repohost.access, async ({ owner_id, repository_ids }) => ({
      repositories: pickRepositories(await provider.repositories(owner_id), repository_ids),
    })),
  ];
}
