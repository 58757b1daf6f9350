import swagger from '@fastify/swagger';
import type { ErrorCode } from '@threadwork/contracts';
import { toAppError, type Logger } from '@threadwork/platform';
import Fastify from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import type { IdentityStore, UserDoc } from './store/identity.js';

declare module 'fastify' {
  interface FastifyRequest {
    user: UserDoc | null;
  }
}

export interface GatewayDeps {
  identity: IdentityStore;
  logger: Logger;
  bodyLimit: number;
  /** Do the backing servers answer? Drives /readyz. */
  ready: () => Promise<boolean>;
}

const STATUS_BY_CODE: Record<ErrorCode, number> = {
  invalid_request: 400,
  unauthorized: 401,
  not_found: 404,
  thread_busy: 409,
  no_active_run: 409,
  already_settled: 409,
  idempotency_conflict: 409,
  payload_too_large: 413,
  rate_limited: 429,
  unavailable: 503,
  internal: 500,
};

/** Paths under /v1 that prove themselves another way (or are public documents). */
const PUBLIC_PATHS = new Set(['/v1/openapi.json', '/v1/repohost/setup', '/v1/repohost/webhooks']);

function bearerKey(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

/**
 * The one HTTP edge: authentication before any other work, zod validation of every request and
 * response, and one error handler that maps the closed set of error codes to status codes.
 */
export async function buildServer(deps: GatewayDeps) {
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: deps.bodyLimit,
    disableRequestLogging: false,
  }).withTypeProvider<ZodTypeProvider>();
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Threadwork API', version: '1.0.0', description: 'Runs coding agents against repositories.' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
  });

  app.decorateRequest('user', null);
  app.addHook('onRequest', async (request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    if (!path.startsWith('/v1/') || PUBLIC_PATHS.has(path)) return;
    const key = bearerKey(request.headers.authorization);
    const user = key ? await deps.identity.authenticate(key) : null;
    if (!user) return reply.code(401).send({ error: 'Unauthorized' });
    request.user = user;
  });

  app.setErrorHandler((err: Error & { statusCode?: number }, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(err)) {
      const issue = err.validation[0];
      const where = issue ? `${err.validationContext ?? 'body'}${issue.instancePath.replace(/\//g, '.')}` : 'request';
      return reply
        .code(400)
        .send({ error: { code: 'invalid_request', message: `${where}: ${issue?.message ?? 'invalid'}` } });
    }
    const status = err.statusCode;
    if (status === 413)
      return reply
        .code(413)
        .send({ error: { code: 'payload_too_large', message: 'request body is larger than the limit' } });
    if (status !== undefined && status >= 400 && status < 500) {
      return reply.code(400).send({ error: { code: 'invalid_request', message: err.message } });
    }
    const appErr = toAppError(err);
    if (appErr.code === 'internal') request.log.error({ err }, 'request failed');
    return reply.code(STATUS_BY_CODE[appErr.code]).send({ error: { code: appErr.code, message: appErr.message } });
  });

  app.setNotFoundHandler((_request, reply) =>
    reply.code(404).send({ error: { code: 'not_found', message: 'no such route' } }),
  );

  app.get('/healthz', { schema: { hide: true }, logLevel: 'silent' }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { hide: true }, logLevel: 'silent' }, async (_request, reply) => {
    const ok = await deps.ready().catch(() => false);
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ready' : 'not_ready' });
  });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());

  return app;
}
