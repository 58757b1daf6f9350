import {
  AnswerRequest,
  AnswerResult,
  IdParam,
  Interaction,
  InteractionList,
  InteractionListQuery,
  rpc,
} from '@threadwork/contracts';
import type { RoutePlugin } from './deps.js';
import { conflictingWriteErrors, readErrors } from './error-responses.js';
import { ownerOf, pathId } from './parse.js';

/** Questions and plan approvals an agent raised, and their one-shot settlement. */
export const interactionRoutes: RoutePlugin = async (app, deps) => {
  app.get(
    '/v1/interactions/:id',
    {
      schema: {
        summary: 'Read an interaction (secret answers redacted)',
        tags: ['interactions'],
        params: IdParam,
        response: { 200: Interaction, ...readErrors },
      },
    },
    async (request) =>
      deps.services.request(rpc.runs.interactionGet, {
        owner_id: ownerOf(request),
        interaction_id: pathId(request.params.id),
      }),
  );

  app.get(
    '/v1/threads/:id/interactions',
    {
      schema: {
        summary: "List a thread's interactions, optionally by status",
        tags: ['interactions'],
        params: IdParam,
        querystring: InteractionListQuery,
        response: { 200: InteractionList, ...readErrors },
      },
    },
    async (request) => {
      const owner_id = ownerOf(request);
      const thread_id = pathId(request.params.id);
      // Interactions are the runs service's; whether the thread is the caller's is the threads
      // service's: a thread of someone else is 404, not an empty list.
      await deps.services.request(rpc.threads.get, { owner_id, thread_id, view: 'thread' });
      return deps.services.request(rpc.runs.interactionList, {
        owner_id,
        thread_id,
        ...(request.query.status === undefined ? {} : { status: request.query.status }),
      });
    },
  );

  app.post(
    '/v1/interactions/:id/answer',
    {
      schema: {
        summary: 'Answer or cancel an interaction',
        description: 'Settlement is one-shot: a second attempt is 409 `already_settled`.',
        tags: ['interactions'],
        params: IdParam,
        body: AnswerRequest,
        response: { 200: AnswerResult.describe('Settled; secret answers redacted'), ...conflictingWriteErrors },
      },
    },
    async (request) =>
      deps.services.request(rpc.runs.interactionAnswer, {
        owner_id: ownerOf(request),
        interaction_id: pathId(request.params.id),
        request: request.body,
      }),
  );
};
