import { setMaxListeners } from 'node:events';
import fp from 'fastify-plugin';
import { sendError } from './errors.js';

/**
 * Aborts `closing` when the server starts closing: long-polls and event streams would otherwise
 * hold `close` up until they end on their own. A request that still reaches us then (on a
 * connection that was busy when closing began) is refused the way any unavailable backend is:
 * 503 `unavailable`, retry elsewhere.
 */
export const shutdown = fp<{ closing: AbortController }>(
  async (app, { closing }) => {
    // Every open long-poll and stream listens for it: as many listeners as followers, not a leak.
    setMaxListeners(0, closing.signal);
    app.addHook('preClose', async () => closing.abort());
    app.addHook('onRequest', (_request, reply, done) => {
      if (!closing.signal.aborted) {
        done();
        return;
      }
      reply.header('connection', 'close').header('retry-after', '1');
      void sendError(reply, 503, 'unavailable', 'the server is shutting down; retry');
    });
  },
  { name: 'shutdown' },
);
