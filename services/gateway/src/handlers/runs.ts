import { IdParam, Run, rpc } from '@threadwork/contracts';
import type { RoutePlugin } from './deps.js';
import { readErrors, writeErrors } from './error-responses.js';
import { ownerOf, pathId } from './parse.js';

/** A run's durable state and its cancellation. Events are in events.ts. */
export const runRoutes: RoutePlugin = async (app, deps) => {
  app.get(
    '/v1/runs/:id',
    {
      schema: {
        summary: 'Read a run: status, timestamps, usage, error and terminal flag',
        tags: ['runs'],
        params: IdParam,
        response: { 200: Run, ...readErrors },
      },
    },
    async (request) =>
      deps.services.request(rpc.runs.get, { owner_id: ownerOf(request), run_id: pathId(request.params.id) }),
  );

  app.post(
    '/v1/runs/:id/cancel',
    {
      schema: {
        summary: 'Cancel a run',
        description:
          'A queued run is `cancelled` at once, a running one `cancelling` until the harness stops. The body is the run as it stands after the request.',
        tags: ['runs'],
        params: IdParam,
        response: {
          200: Run.describe('The run was already terminal; nothing changed'),
          202: Run.describe('Cancellation requested'),
          ...writeErrors,
        },
      },
    },
    async (request, reply) => {
      const { run, requested } = await deps.services.request(rpc.runs.cancel, {
        owner_id: ownerOf(request),
        run_id: pathId(request.params.id),
      });
      return reply.code(requested ? 202 : 200).send(run);
    },
  );
};
