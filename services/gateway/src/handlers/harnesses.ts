import { HarnessList, rpc } from '@threadwork/contracts';
import type { RoutePlugin } from './deps.js';
import { readErrors } from './error-responses.js';

/** The harnesses this deployment serves, read from the runs service, which admits runs with them. */
export const harnessRoutes: RoutePlugin = async (app, deps) => {
  app.get(
    '/v1/harnesses',
    {
      schema: {
        summary: 'List the harnesses this deployment serves, with the models and reasoning efforts each takes',
        description:
          "What `harness`, `model`, `reasoning_effort` and `collaboration_mode` of a new thread or task may be. A thread or task that names something else is refused with 400 naming what is allowed; one that names nothing gets the default harness and that harness's default model and effort.",
        tags: ['harnesses'],
        response: { 200: HarnessList, ...readErrors },
      },
    },
    async () => deps.services.request(rpc.runs.harnesses, {}),
  );
};
