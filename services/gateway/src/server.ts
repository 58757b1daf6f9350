import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import swagger from '@fastify/swagger';
import { HTTP_STATUS_BY_CODE, registerApiComponents, SubjectTokenError } from '@threadwork/contracts';
import {
  AppError,
  httpTelemetry,
  mongoCall,
  retryAfterSeconds,
  telemetryEnabled,
  toAppError,
  type Logger,
  type NatsConnection,
  withRequestId,
} from '@threadwork/platform';
import Fastify, { LogController, type FastifyError, type FastifyReply, type FastifyRequest } from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import { isWellFormedKey } from './domain/keys.js';
import { FailureLimiter, PerAddressLimiter } from './domain/per-address-limit.js';
import { TokenBuckets, type RateLimit } from './domain/rate-limit.js';
import { readCookie, SESSION_COOKIE, verifySession } from './domain/session.js';
import { backingServices } from './clients/backing-services.js';
import { Followers } from './domain/followers.js';
import type { HandlerDeps, RoutePlugin } from './handlers/deps.js';
import { OPERATION_IDS } from './http/operation-ids.js';
import { componentsTransform } from './http/openapi-components.js';
import type { TrustProxy } from './config.js';
import { discardBody } from './http/oversized-body.js';
import { conversationRoutes } from './handlers/conversation.js';
import { eventRoutes, STREAM_DESCRIPTION } from './handlers/events.js';
import { interactionRoutes } from './handlers/interactions.js';
import { repohostRoutes } from './handlers/repohost.js';
import { repohostAppRoutes, webhookRoutes } from './handlers/repohost-app.js';
import { reviewRoutes } from './handlers/review.js';
import { runRoutes } from './handlers/runs.js';
import { threadRoutes } from './handlers/threads.js';
import type { IdentityStore, UserDoc } from './store/identity.js';
import { z } from 'zod';

/** What the probes answer. */
const ProbeStatus = z.object({ status: z.enum(['ok', 'ready', 'not_ready']) });
/** This document, loosely: what it must contain is the OpenAPI specification's business. */
const OpenApiDocument = z.looseObject({
  openapi: z.string(),
  info: z.looseObject({ title: z.string(), version: z.string() }),
  paths: z.record(z.string(), z.unknown()),
});
type OpenApiDocument = z.infer<typeof OpenApiDocument>;

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
  /** The way to the backing services (request/reply) and to run events (core subscriptions). */
  nc: NatsConnection;
  /** How long a backing service may take before the answer is 503. */
  requestTimeoutMs: number;
  /** Per caller, per replica. */
  rateLimit: RateLimit;
  /**
   * API keys that match no one, per client address, per replica (AUTH_FAILURES_*): past it the
   * address is answered 429 without a database lookup. Default: 0.5 a second, 20 at once.
   */
  authFailureLimit?: RateLimit;
  /** Which proxies say who the client is (TRUST_PROXY, fastify's trustProxy); default none. */
  trustProxy?: TrustProxy;
  /** Per client address, per replica, on the unauthenticated paths that reach a backing service. */
  publicRateLimit?: RateLimit;
  /** The GitHub App's webhook secret; without it every webhook delivery is refused (401). */
  webhookSecret?: string | null;
  /** Key that signs `tw_session` cookies. */
  sessionSecret: string;
  /** Comment frames keep idle event streams alive through proxies that cut silent connections. */
  heartbeatMs?: number;
  /** Event streams and long-polls one user may hold open at once on this replica. */
  maxFollowersPerUser?: number;
}

const HEARTBEAT_MS = 15_000;
const MAX_FOLLOWERS_PER_USER = 32;

/**
 * Probes come every few seconds and say nothing worth a log line. Kept out of the request log by
 * the log controller rather than a per-route log level: that level costs a logger of its own for
 * every request to the route.
 */
const PROBE_ROUTES = new Set(['/healthz', '/readyz']);

/** Paths under /v1 that prove themselves another way (or are public documents). */
const PUBLIC_PATHS = new Set(['/v1/openapi.json', '/v1/repohost/setup', '/v1/repohost/webhooks']);
/**
 * The public paths that reach a backing service, limited per client address before any other work
 * (the body of a webhook is not read yet). The OpenAPI document is served from memory.
 */
const ADDRESS_LIMITED_PATHS = new Set(['/v1/repohost/setup', '/v1/repohost/webhooks']);
const PUBLIC_RATE_LIMIT: RateLimit = { perSecond: 5, burst: 50 };

const ROUTES: RoutePlugin[] = [
  threadRoutes,
  conversationRoutes,
  runRoutes,
  eventRoutes,
  interactionRoutes,
  repohostRoutes,
  repohostAppRoutes,
  reviewRoutes,
  webhookRoutes,
];

/** Longer path segments are not routed at all (414); anything up to it is validated by schema. */
const MAX_PARAM_LENGTH = 1024;
/** How long an idle client connection stays open: beyond the usual load balancer idle timeout (60 s). */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** Methods a cross-site page can trigger with the browser's cookies but must not. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const API_DESCRIPTION = [
  'Runs coding agents against repositories.',
  '',
  'Authentication: `Authorization: Bearer <API key>`, or a `tw_session` cookie',
  '(`<user id>.<expires epoch s>.<HMAC-SHA256>`, issued by `npm run admin -- sessions create`).',
  'Cookie-authenticated writes from another site (`Sec-Fetch-Site: cross-site`) are refused.',
  '',
  'Rate limit: a token bucket per caller and per gateway replica (RATE_LIMIT_PER_SECOND, RATE_LIMIT_BURST);',
  'above it 429 `rate_limited` with `Retry-After` in seconds. API keys that match no one are limited per client',
  'address (AUTH_FAILURES_PER_SECOND, AUTH_FAILURES_BURST): past it 429 `rate_limited`, also before a 401.',
  'The unauthenticated setup callback and webhooks are limited per client address instead',
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

function bearerKey(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

/**
 * The identity lookup waits no longer than a backing service may take: a database that stopped
 * answering makes it 503 `unavailable` in time, not a request that hangs until the driver notices.
 */
const identityLookup = (deps: GatewayDeps) => ({ timeoutMs: deps.requestTimeoutMs });

/** TRUST_PROXY as fastify's types take it: a number of hops is the function fastify makes of one. */
function fastifyTrustProxy(trust: TrustProxy): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust !== 'number') return trust;
  return (_address, hop) => hop < trust;
}

/** Unknown API keys one client address may present: 20 at once, then one every two seconds. */
const AUTH_FAILURE_LIMIT: RateLimit = { perSecond: 0.5, burst: 20 };
/**
 * Lookups of keys not remembered yet, under way at once for one address: good keys are never
 * charged, however many arrive together; a guesser's wave past the limit is at most this long.
 */
const KEY_LOOKUPS_IN_FLIGHT_PER_ADDRESS = 256;

/** An address that presented too many unknown API keys: answered 429 before any lookup. */
class AddressLimited extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super('too many unknown API keys from this address');
  }
}

/**
 * The user of a bearer key. A malformed key is refused without a lookup, a key accepted moments
 * ago is known without one; any other costs a database lookup, so it takes a token of the client
 * address's budget first (a guesser cannot turn the gateway into load on the database) and gives
 * it back unless the key turned out unknown or revoked.
 */
async function authenticateKey(
  key: string,
  request: FastifyRequest,
  deps: GatewayDeps,
  guesses: FailureLimiter,
): Promise<UserDoc | null> {
  if (!isWellFormedKey(key)) return null;
  const known = deps.identity.remembered?.(key);
  if (known) return known;
  const attempt = guesses.begin(request.ip);
  if (!attempt.allowed) throw new AddressLimited(attempt.retryAfterSeconds);
  let unknown = false;
  try {
    const user = await mongoCall(() => deps.identity.authenticate(key), identityLookup(deps));
    unknown = user === null;
    return user;
  } finally {
    // A database that failed says nothing about the key: only an unknown one counts.
    attempt.end(unknown);
  }
}

/**
 * Which user a request acts for: a bearer key when an Authorization header is sent (a bad one is
 * not rescued by a cookie), else a valid session cookie. Null means 401.
 */
async function authenticate(
  request: FastifyRequest,
  deps: GatewayDeps,
  guesses: FailureLimiter,
): Promise<UserDoc | null> {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) {
    const key = bearerKey(authorization);
    return key ? authenticateKey(key, request, deps, guesses) : null;
  }
  const session = readCookie(request.headers.cookie, SESSION_COOKIE);
  if (session === null) return null;
  const userId = verifySession(session, deps.sessionSecret, Math.floor(Date.now() / 1000));
  if (userId === null) return null;
  // A browser session must not be usable by another page (CSRF): browsers say where a request
  // comes from in Sec-Fetch-Site, and a write must come from the API's own origin. `same-site` is
  // not enough: a sibling subdomain is the same site, and it may be anyone's. Without the header
  // (older browsers, clients that are not browsers) the cookie's SameSite attribute is the guard.
  const site = request.headers['sec-fetch-site'];
  if (!SAFE_METHODS.has(request.method) && site !== undefined && site !== 'same-origin') return null;
  return mongoCall(() => deps.identity.findUser(userId), identityLookup(deps));
}

/** What a 500 says, whatever failed: the details are in the log under the request's id. */
const INTERNAL_MESSAGE = 'internal error';

function sendError(reply: FastifyReply, status: number, code: string, message: string) {
  return reply.code(status).send({ error: { code, message } });
}

const LIVENESS_BODY = '{"status":"ok"}';

/**
 * `GET /healthz` straight from the HTTP server: a liveness probe asks whether this process's event
 * loop answers, which needs no routing, hooks or request logger (the route of the same name below
 * serves in-process requests, which do not pass through the server).
 */
function answerLiveness(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== 'GET' || req.url !== '/healthz') return false;
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': LIVENESS_BODY.length });
  res.end(LIVENESS_BODY);
  return true;
}

/** `/prompt` of a zod issue in `body` → `body.prompt`; the root → `body`. */
function fieldName(context: string, instancePath: string): string {
  const path = instancePath.split('/').filter(Boolean).join('.');
  return path ? `${context}.${path}` : context;
}

/** Fastify's own request errors, named after the part of the request at fault. */
const FASTIFY_REQUEST_ERRORS: Record<string, string> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'body: not valid JSON',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'headers.content-type: unsupported media type (send application/json)',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'headers.content-length: does not match the body',
};

/**
 * The one HTTP edge: authentication before any other work, a rate limit per caller, zod
 * validation of every request and response, and one error handler that maps the closed set of
 * error codes to status codes.
 */
export async function buildServer(deps: GatewayDeps) {
  const app = Fastify({
    serverFactory: (handler) => {
      const server = createServer((req, res) => answerLiveness(req, res) || handler(req, res));
      // Node's own 5 s would close idle connections as clients (and load balancers, whose idle
      // timeouts are typically 60 s) reuse them, failing their next request; Fastify's default.
      server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
      return server;
    },
    loggerInstance: deps.logger,
    // Each request's id: in the log of every service that serves it (request_id), and answered in
    // X-Request-Id for a client to quote. Made here, never taken from the client.
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    // Who the client is (request.ip: the per-address limits, the request log) behind proxies.
    trustProxy: fastifyTrustProxy(deps.trustProxy ?? false),
    bodyLimit: deps.bodyLimit,
    // Above the contract's 256 so an overlong id reaches validation and is a 400 naming
    // `params.id`, not the router's bare 414.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Fastify's own 503 for requests that arrive while it closes has a body of its own shape;
    // the hook below answers them with the contract's error instead.
    return503OnClosing: false,
    // Probes are answered tens of thousands of times a second and log nothing: no per-request child.
    childLoggerFactory: (logger, bindings, opts, rawRequest) =>
      PROBE_ROUTES.has(rawRequest.url ?? '') ? logger : logger.child(bindings, opts),
    logController: new LogController({
      disableRequestLogging: (request) => PROBE_ROUTES.has(request.routeOptions.url ?? ''),
    }),
  }).withTypeProvider<ZodTypeProvider>();
  // Spans and the request-duration histogram cost a hook on every request even when nothing
  // records them, so the hook is there only when a telemetry SDK is.
  if (telemetryEnabled()) await app.register(httpTelemetry);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  // An empty body with `content-type: application/json` is "no body" (a bodiless POST from a
  // client that always sets the header); routes that need one then say `body: …` is missing.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text === '') return done(null, undefined);
    parseJson(request, text, done);
  });

  // Every documented operation gets its stable operationId; a new route must be named in the table.
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

  // Long-polls and event streams would hold `close` up until they end on their own.
  const closing = new AbortController();
  // Every open long-poll and stream listens for it: as many listeners as followers, not a leak.
  setMaxListeners(0, closing.signal);
  app.addHook('preClose', async () => closing.abort());
  const buckets = new TokenBuckets(deps.rateLimit);
  const guesses = new FailureLimiter(deps.authFailureLimit ?? AUTH_FAILURE_LIMIT, KEY_LOOKUPS_IN_FLIGHT_PER_ADDRESS);
  const publicLimiter = new PerAddressLimiter(deps.publicRateLimit ?? PUBLIC_RATE_LIMIT);
  app.decorateRequest('user', null);
  /** Authentication and the rate limit of an API request; true when it has been answered here. */
  const guard = async (request: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
    let user: UserDoc | null;
    try {
      user = await authenticate(request, deps, guesses);
    } catch (err) {
      if (!(err instanceof AddressLimited)) throw err;
      request.log.warn(
        { address: request.ip },
        'too many unknown API keys from this address; refused without a lookup',
      );
      reply.header('retry-after', String(err.retryAfterSeconds));
      await sendError(reply, 429, 'rate_limited', `${err.message}; retry in ${err.retryAfterSeconds} s`);
      return true;
    }
    if (!user) {
      await reply.code(401).send({ error: 'Unauthorized' });
      return true;
    }
    request.user = user;
    const decision = buckets.take(user._id, Date.now());
    if (decision.allowed) return false;
    reply.header('retry-after', String(decision.retryAfterSeconds));
    await sendError(reply, 429, 'rate_limited', `too many requests; retry in ${decision.retryAfterSeconds} s`);
    return true;
  };
  const onRequest = (request: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
    if (closing.signal.aborted) {
      // A request that still reaches us while we close (on a connection that was busy when closing
      // began) is refused the way any unavailable backend is: 503 `unavailable`, retry elsewhere.
      reply.header('connection', 'close').header('retry-after', '1');
      void sendError(reply, 503, 'unavailable', 'the server is shutting down; retry');
      return;
    }
    const path = request.url.split('?')[0] ?? '';
    if (!path.startsWith('/v1/') || PUBLIC_PATHS.has(path)) {
      if (ADDRESS_LIMITED_PATHS.has(path)) {
        const decision = publicLimiter.take(request.ip);
        if (!decision.allowed) {
          reply.header('retry-after', String(decision.retryAfterSeconds));
          void sendError(
            reply,
            429,
            'rate_limited',
            `too many requests from this address; retry in ${decision.retryAfterSeconds} s`,
          );
          return;
        }
      }
      done();
      return;
    }
    guard(request, reply).then(
      (answered) => {
        if (!answered) done();
      },
      (err: unknown) => done(err instanceof Error ? err : new Error(String(err))),
    );
  };
  // One hook in callback style, so probes and public paths pass without a promise or a tick.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    // Everything this request does from here on, the calls to other services included, runs as it.
    withRequestId(request.id, () => onRequest(request, reply, done));
  });
  // A body is read on the socket's events, which may run outside the request's context: enter it
  // again before the handler (as @fastify/request-context does).
  app.addHook('preValidation', (request, _reply, done) => withRequestId(request.id, () => done()));

  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(err)) {
      const issue = err.validation[0];
      const context = err.validationContext ?? 'body';
      if (!issue) return sendError(reply, 400, 'invalid_request', `${context}: invalid`);
      // A strict object reports unknown properties at its own path; name the property instead.
      const unknownKey =
        issue.keyword === 'unrecognized_keys' ? (issue.params.keys as string[] | undefined)?.[0] : undefined;
      const where = fieldName(
        context,
        unknownKey === undefined ? issue.instancePath : `${issue.instancePath}/${unknownKey}`,
      );
      const message = unknownKey === undefined ? (issue.message ?? 'invalid') : 'unknown property';
      return sendError(reply, 400, 'invalid_request', `${where}: ${message}`);
    }
    if (err instanceof SubjectTokenError) return sendError(reply, 404, 'not_found', 'resource not found');
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE' || err.statusCode === 413) {
      const limit = request.routeOptions.bodyLimit ?? deps.bodyLimit;
      // Fastify asks for the connection to be closed; let the client finish sending first.
      return discardBody(request.raw).then(() =>
        sendError(reply, 413, 'payload_too_large', `request body is larger than ${limit} bytes`),
      );
    }
    if (!(err instanceof AppError) && err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
      // Fastify's own complaints about the request (JSON syntax, media type, lengths).
      return sendError(reply, 400, 'invalid_request', FASTIFY_REQUEST_ERRORS[err.code] ?? `request: ${err.message}`);
    }
    const appErr = toAppError(err);
    if (appErr.code === 'internal') {
      // The failure's own text (a service's, GitHub's through repohost) is for the log only: the
      // client gets the code and the request id (X-Request-Id) to quote.
      request.log.error({ err }, 'request failed');
      return sendError(reply, 500, 'internal', INTERNAL_MESSAGE);
    }
    if (appErr.code === 'unauthorized') return reply.code(401).send({ error: 'Unauthorized' });
    // Both are worth retrying; say when: as the service that refused says, else soon.
    if (appErr.code === 'unavailable' || appErr.code === 'rate_limited') {
      reply.header('retry-after', String(retryAfterSeconds(appErr)));
    }
    return sendError(reply, HTTP_STATUS_BY_CODE[appErr.code], appErr.code, appErr.message);
  });

  app.setNotFoundHandler((_request, reply) => sendError(reply, 404, 'not_found', 'no such route'));

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
      const ok = await deps.ready().catch(() => false);
      return reply.code(ok ? 200 : 503).send({ status: ok ? 'ready' : 'not_ready' });
    },
  );
  app.get(
    '/v1/openapi.json',
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

  const handlerDeps: HandlerDeps = {
    nc: deps.nc,
    services: backingServices(deps.nc, deps.requestTimeoutMs),
    closing: closing.signal,
    heartbeatMs: deps.heartbeatMs ?? HEARTBEAT_MS,
    followers: new Followers(deps.maxFollowersPerUser ?? MAX_FOLLOWERS_PER_USER),
    webhookSecret: deps.webhookSecret ?? null,
    refundAddress: (request) => publicLimiter.refund(request.ip),
  };
  for (const routes of ROUTES) await app.register(routes, handlerDeps);

  return app;
}
