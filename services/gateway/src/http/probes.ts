import type { IncomingMessage, ServerResponse } from 'node:http';
import { LogController, type FastifyHttpOptions, type FastifyPluginAsync, type RawServerDefault } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';

// Probes come every few seconds, and a load balancer's liveness probe tens of thousands of times a
// second under a benchmark: they say nothing worth a log line and need none of the request's work.
// Measured (bench/RESULTS.md, benchmark 2), so all of it is here:
// - `GET /healthz` over the network is answered by the HTTP server itself, before fastify's
//   routing, hooks and request logger (`answerLivenessFirst`, used by server.ts's serverFactory);
// - the probes get no per-request child logger and no request log lines (`quietProbes`): a
//   per-route log level would cost a re-levelled logger of its own for every request;
// - the routes below answer in-process requests (`inject`), which do not pass through the server,
//   and `/readyz`.

const PROBE_ROUTES = new Set(['/healthz', '/readyz']);
const LIVENESS_BODY = '{"status":"ok"}';

/** The request listener: `GET /healthz` answered at once, anything else handed to fastify. */
export function answerLivenessFirst(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (req.method !== 'GET' || req.url !== '/healthz') return handler(req, res);
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': LIVENESS_BODY.length });
    res.end(LIVENESS_BODY);
  };
}

/** Fastify options that keep probes out of the request log. */
export const quietProbes: Pick<FastifyHttpOptions<RawServerDefault>, 'childLoggerFactory' | 'logController'> = {
  childLoggerFactory: (logger, bindings, opts, rawRequest) =>
    PROBE_ROUTES.has(rawRequest.url ?? '') ? logger : logger.child(bindings, opts),
  logController: new LogController({
    disableRequestLogging: (request) => PROBE_ROUTES.has(request.routeOptions.url ?? ''),
  }),
};

/** What the probes answer. */
const ProbeStatus = z.object({ status: z.enum(['ok', 'ready', 'not_ready']) });

/** `/healthz` (the process answers) and `/readyz` (`ready`: NATS and the database answer). */
export const probes: FastifyPluginAsync<{ ready: () => Promise<boolean> }, RawServerDefault, ZodTypeProvider> = async (
  app,
  { ready },
) => {
  app.get(
    '/healthz',
    {
      schema: {
        summary: 'Liveness: the process answers',
        tags: ['probes'],
        security: [],
        response: { 200: ProbeStatus },
      },
    },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/readyz',
    {
      schema: {
        summary: 'Readiness: NATS and the database answer',
        tags: ['probes'],
        security: [],
        response: { 200: ProbeStatus, 503: ProbeStatus.describe('A backing server does not answer') },
      },
    },
    async (_request, reply) => {
      const ok = await ready().catch(() => false);
      return reply.code(ok ? 200 : 503).send({ status: ok ? 'ready' : 'not_ready' });
    },
  );
};
