import { IdParam, ReviewEvidence, ReviewQuery, rpc } from '@threadwork/contracts';
import type { RoutePlugin } from './deps.js';
import { readErrors } from './error-responses.js';
import { ownerOf, pathId } from './parse.js';

/** Review evidence of one repository of a thread: bounded diff, stats, candidate revision, pull request. */
export const reviewRoutes: RoutePlugin = async (app, deps) => {
  app.get(
    '/v1/threads/:id/review',
    {
      schema: {
        summary: "Review evidence of one of the thread's repositories",
        description: [
          'The bounded diff of the candidate tree (`diff.truncated` when cut), file and line statistics,',
          'the candidate revision and the pull request with its checks (`publication`, null until one is opened).',
          '`diff.status`: `no_sandbox` before any run produced a candidate, `pending` while a run is live',
          '(the previous candidate is shown), `error` when the latest candidate could not be made, else `ready`.',
          "`project_repository_id` is an `id` of the project's `repositories` in GET /v1/work.",
        ].join(' '),
        tags: ['threads'],
        params: IdParam,
        querystring: ReviewQuery,
        response: { 200: ReviewEvidence, ...readErrors },
      },
    },
    async (request) =>
      deps.services.request(rpc.review.get, {
        owner_id: ownerOf(request),
        thread_id: pathId(request.params.id),
        project_repository_id: request.query.project_repository_id,
      }),
  );
};
