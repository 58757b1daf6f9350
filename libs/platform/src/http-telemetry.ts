import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { FastifyPluginCallback } from 'fastify';
import { meter, tracer } from './telemetry.js';

/**
 * A SERVER span per HTTP request, continuing the caller's `traceparent`, active while the route
 * runs (so NATS requests and database calls made for it join the same trace), and the request
 * duration histogram per route and status. Fastify hooks rather than monkey-patching `http`, so it
 * works the same under ESM and needs no loader flags.
 */
export const httpTelemetry: FastifyPluginCallback = (app, _options, pluginDone) => {
  const duration = meter().createHistogram('http.server.request.duration', {
    description: 'Duration of HTTP requests, per route and status',
    unit: 's',
  });

  app.addHook('onRequest', (request, reply, done) => {
    const parent = propagation.extract(context.active(), request.headers);
    const route = request.routeOptions.url ?? 'unmatched';
    const span = tracer().startSpan(
      `${request.method} ${route}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          'http.request.method': request.method,
          'http.route': route,
          'url.path': request.url.split('?')[0] ?? '',
        },
      },
      parent,
    );
    const started = performance.now();
    // The raw response's close covers every ending: a reply sent, a stream (SSE) that ended or
    // was hijacked, a client that went away.
    reply.raw.once('close', () => {
      const status = reply.raw.statusCode;
      span.setAttribute('http.response.status_code', status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      duration.record((performance.now() - started) / 1000, {
        'http.request.method': request.method,
        'http.route': route,
        'http.response.status_code': status,
      });
    });
    // Everything after this hook — the route's handler included — runs inside the span's context.
    context.with(trace.setSpan(parent, span), done);
  });
  pluginDone();
};
// Hooks of a plugin normally stay inside its own scope; these must see every route.
Object.assign(httpTelemetry, { [Symbol.for('skip-override')]: true });
