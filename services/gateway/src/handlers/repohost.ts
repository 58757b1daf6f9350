import { ProviderConnection, RepositoriesQuery, RepositoryList, rpc } from '@threadwork/contracts';
import type { RoutePlugin } from './deps.js';
import { readErrors } from './error-responses.js';
import { ownerOf } from './parse.js';

/** The caller's provider connection and the repositories it can see. */
export const repohostRoutes: RoutePlugin = async (app, deps) => {
  app.get(
    '/v1/repohost/connection',
    {
      schema: {
        summary: "The caller's provider connection: installations and pending installation requests",
        tags: ['repohost'],
        response: { 200: ProviderConnection, ...readErrors },
      },
    },
    async (request) => deps.services.request(rpc.repohost.connection, { owner_id: ownerOf(request) }),
  );

  app.get(
    '/v1/repohost/repositories',
    {
      schema: {
        summary: 'List the repositories the caller can see',
        description: '`q` keeps repositories whose `full_name` contains it, ignoring case.',
        tags: ['repohost'],
        querystring: RepositoriesQuery,
        response: { 200: RepositoryList, ...readErrors },
      },
    },
    async (request) =>
      deps.services.request(rpc.repohost.repositories, {
        owner_id: ownerOf(request),
        ...(request.query.q === undefined ? {} : { q: request.query.q }),
      }),
  );
};
