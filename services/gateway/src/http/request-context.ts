import { withRequestId } from '@threadwork/platform';
import fp from 'fastify-plugin';

/**
 * Each request's id in `X-Request-Id` (for a client to quote) and as the context everything it does
 * runs in, the calls to other services included (their logs then carry `request_id`).
 */
export const requestContext = fp(
  async (app) => {
    // The first hook: every answer carries the id, the refusals of the hooks after it too.
    app.addHook('onRequest', (request, reply, done) => {
      reply.header('x-request-id', request.id);
      // The hooks after this one, and the handler, are called from `done`: inside the context.
      withRequestId(request.id, () => done());
    });
    // A body is read on the socket's events, which may run outside the request's context: enter it
    // again before the handler (as @fastify/request-context does).
    app.addHook('preValidation', (request, _reply, done) => withRequestId(request.id, () => done()));
  },
  { name: 'request-context' },
);
