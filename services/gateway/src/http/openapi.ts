import swagger from '@fastify/swagger';
import { registerApiComponents } from '@threadwork/contracts';
import type { FastifyPluginAsync, RawServerDefault } from 'fastify';
import fp from 'fastify-plugin';
import { jsonSchemaTransform, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { SESSION_COOKIE } from '../domain/session.js';
import { STREAM_DESCRIPTION } from '../handlers/events.js';
import { OPENAPI_PATH } from './auth.js';
import { componentsTransform } from './openapi-components.js';
import { OPERATION_IDS } from './operation-ids.js';

/** This document, loosely: what it must contain is the OpenAPI specification's business. */
const OpenApiDocument = z.looseObject({
  openapi: z.string(),
  info: z.looseObject({ title: z.string(), version: z.string() }),
  paths: z.record(z.string(), z.unknown()),
});
type OpenApiDocument = z.infer<typeof OpenApiDocument>;

const API_DESCRIPTION = [
  'Runs coding agents against repositories.',
  '',
  'Authentication: `Authorization: Bearer <API key>`, or a `tw_session` cookie',
  '(`<user id>.<session epoch>.<expires epoch s>.<HMAC-SHA256>`), set by a one-time login link',
  '(`GET /v1/auth/link`, links from `npm run admin -- login-link`), by signing in with GitHub',
  '(`GET /v1/auth/github`, where `GET /v1/auth/providers` says it is offered: a GitHub user, by numeric id, is one user',
  'named `github:<login>`, never merged with a user made by the admin CLI), or issued by `npm run admin -- sessions create`.',
  'Signing out (`POST /v1/auth/logout`) ends every session of the user; the older three-part cookie is refused.',
  'Cookie-authenticated writes from another origin (`Sec-Fetch-Site` other than `same-origin`) are refused.',
  'The `settings` operations (your own API keys) take the session cookie only: with an API key they are 403 `forbidden`.',
  '',
  'Rate limit: a token bucket per caller and per gateway replica (RATE_LIMIT_PER_SECOND, RATE_LIMIT_BURST);',
  'above it 429 `rate_limited` with `Retry-After` in seconds. API keys that match no one are limited per client',
  'address (AUTH_FAILURES_PER_SECOND, AUTH_FAILURES_BURST): past it 429 `rate_limited`, also before a 401.',
  'The unauthenticated setup callback, webhooks, login links and sign-in with GitHub are limited per client address instead',
  '(PUBLIC_RATE_LIMIT_PER_SECOND, PUBLIC_RATE_LIMIT_BURST; an accepted webhook delivery gives its token back),',
  'the address as TRUST_PROXY allows proxies to name it.',
  '',
  'Every answer carries `X-Request-Id`: quote it when reporting a 500, whose message never carries the cause.',
  '',
  'Per-user limits, for the whole deployment: at most MAX_LIVE_RUNS_PER_USER runs live at once (past it',
  'creating a thread or task, sending a message or queueing on an idle thread is 409 `too_many_runs`, with',
  'nothing written; a follow-up queued behind a run waits pending for room), and at most',
  'THREADS_PER_MINUTE_PER_USER threads or tasks created in any minute (past it 429 `rate_limited` with `Retry-After`).',
  '',
  `Run event stream: ${STREAM_DESCRIPTION}`,
].join('\n');

/**
 * The OpenAPI document of every route registered after it, each operation named from
 * OPERATION_IDS: a documented route missing from the table stops the gateway at start.
 */
export const openApi = fp(
  async (app) => {
    app.addHook('onRoute', (route) => {
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      if (route.schema?.hide || methods.every((method) => method === 'HEAD')) return;
      for (const method of methods.filter((m) => m !== 'HEAD')) {
        const operationId = OPERATION_IDS[`${method} ${route.url}`];
        if (operationId === undefined) throw new Error(`no operationId for ${method} ${route.url} in OPERATION_IDS`);
        route.schema = { ...route.schema, operationId };
      }
    });

    registerApiComponents();
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'Threadwork API',
          version: '1.0.0',
          description: API_DESCRIPTION,
          license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
        },
        // Where the document was fetched from is where the API is: clients set `origin` to that.
        servers: [
          {
            url: '{origin}',
            description: 'This gateway',
            variables: {
              origin: { default: 'http://localhost:8080', description: 'Scheme, host and port of the gateway' },
            },
          },
        ],
        components: {
          securitySchemes: {
            bearer: { type: 'http', scheme: 'bearer' },
            session: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE },
          },
        },
        security: [{ bearer: [] }, { session: [] }],
      },
      transform: jsonSchemaTransform,
      transformObject: componentsTransform,
    });
  },
  { name: 'openapi' },
);

/** `GET /v1/openapi.json`, served from memory. */
export const openApiDocument: FastifyPluginAsync<object, RawServerDefault, ZodTypeProvider> = async (app) => {
  app.get(
    OPENAPI_PATH,
    {
      schema: {
        summary: 'This OpenAPI document',
        tags: ['meta'],
        security: [],
        response: { 200: OpenApiDocument },
      },
    },
    async () => app.swagger() as unknown as OpenApiDocument,
  );
};
