import { createServer } from 'node:http';
import { httpTelemetry, telemetryEnabled, type Logger, type NatsConnection } from '@threadwork/platform';
import Fastify from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { backingServices } from './clients/backing-services.js';
import type { TrustProxy } from './config.js';
import { Followers } from './domain/followers.js';
import type { SignInAllowList } from './domain/github-sign-in.js';
import { newRequestId } from './domain/ids.js';
import { PerAddressLimiter } from './domain/per-address-limit.js';
import type { RateLimit } from './domain/rate-limit.js';
import { apiKeyRoutes } from './handlers/api-keys.js';
import { conversationRoutes } from './handlers/conversation.js';
import type { HandlerDeps, RoutePlugin } from './handlers/deps.js';
import { eventRoutes } from './handlers/events.js';
import { harnessRoutes } from './handlers/harnesses.js';
import { interactionRoutes } from './handlers/interactions.js';
import { repohostRoutes } from './handlers/repohost.js';
import { repohostAppRoutes, webhookRoutes } from './handlers/repohost-app.js';
import { reviewRoutes } from './handlers/review.js';
import { githubSignInRoutes } from './handlers/github-sign-in.js';
import { sessionRoutes } from './handlers/session.js';
import { runRoutes } from './handlers/runs.js';
import { threadRoutes } from './handlers/threads.js';
import { authentication } from './http/auth.js';
import { consoleRoutes } from './http/console.js';
import { errorMapping } from './http/errors.js';
import { jsonBody } from './http/json-body.js';
import { openApi, openApiDocument } from './http/openapi.js';
import { answerLivenessFirst, probes, quietProbes } from './http/probes.js';
import { PUBLIC_RATE_LIMIT, rateLimits } from './http/rate-limit.js';
import { requestContext } from './http/request-context.js';
import { shutdown } from './http/shutdown.js';
import type { IdentityStore } from './store/identity.js';

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
  /** How long a session made from a login link lasts (SESSION_TTL_HOURS); default 7 days. */
  sessionTtlSeconds?: number;
  /** Comment frames keep idle event streams alive through proxies that cut silent connections. */
  heartbeatMs?: number;
  /** Event streams and long-polls one user may hold open at once on this replica. */
  maxFollowersPerUser?: number;
  /** The built web console, served at `/` (CONSOLE_DIR); without it only the API is served. */
  consoleDir?: string | null;
  /** Who may sign in with GitHub (GITHUB_SIGN_IN_ALLOW); default nobody (not offered). */
  githubSignInAllow?: SignInAllowList | null;
}

const HEARTBEAT_MS = 15_000;
const SESSION_TTL_SECONDS = 7 * 24 * 3600;
const MAX_FOLLOWERS_PER_USER = 32;

/** Registered in this order, which is the order of the OpenAPI document's paths. */
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
  harnessRoutes,
  apiKeyRoutes,
  sessionRoutes,
  githubSignInRoutes,
];

/** Longer path segments are not routed at all (414); anything up to it is validated by schema. */
const MAX_PARAM_LENGTH = 1024;
/** How long an idle client connection stays open: beyond the usual load balancer idle timeout (60 s). */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;

/** TRUST_PROXY as fastify's types take it: a number of hops is the function fastify makes of one. */
function fastifyTrustProxy(trust: TrustProxy): boolean | string[] | ((address: string, hop: number) => boolean) {
  if (typeof trust !== 'number') return trust;
  return (_address, hop) => hop < trust;
}

/**
 * The one HTTP edge: authentication before any other work, a rate limit per caller, zod
 * validation of every request and response, and one error handler that maps the closed set of
 * error codes to status codes. The plugins run their request hooks in the order registered.
 */
export async function buildServer(deps: GatewayDeps) {
  const app = Fastify({
    serverFactory: (handler) => {
      const server = createServer(answerLivenessFirst(handler));
      // Node's own 5 s would close idle connections as clients (and load balancers, whose idle
      // timeouts are typically 60 s) reuse them, failing their next request; Fastify's default.
      server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
      return server;
    },
    loggerInstance: deps.logger,
    // Each request's id: in the log of every service that serves it (request_id), and answered in
    // X-Request-Id for a client to quote. Made here, never taken from the client.
    genReqId: newRequestId,
    requestIdHeader: false,
    // Who the client is (request.ip: the per-address limits, the request log) behind proxies.
    trustProxy: fastifyTrustProxy(deps.trustProxy ?? false),
    bodyLimit: deps.bodyLimit,
    // Above the contract's 256 so an overlong id reaches validation and is a 400 naming
    // `params.id`, not the router's bare 414.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Fastify's own 503 for requests that arrive while it closes has a body of its own shape;
    // the shutdown plugin answers them with the contract's error instead.
    return503OnClosing: false,
    ...quietProbes,
  }).withTypeProvider<ZodTypeProvider>();
  // Spans and the request-duration histogram cost a hook on every request even when nothing
  // records them, so the hook is there only when a telemetry SDK is.
  if (telemetryEnabled()) await app.register(httpTelemetry);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(jsonBody);
  // Before any route: it names and documents every route registered after it.
  await app.register(openApi);

  // Request hooks, in this order: id and context, refusal while closing, who the caller is, limits.
  const closing = new AbortController();
  const perAddress = new PerAddressLimiter(deps.publicRateLimit ?? PUBLIC_RATE_LIMIT);
  await app.register(requestContext);
  await app.register(shutdown, { closing });
  await app.register(authentication, {
    identity: deps.identity,
    sessionSecret: deps.sessionSecret,
    ...(deps.authFailureLimit === undefined ? {} : { authFailureLimit: deps.authFailureLimit }),
  });
  await app.register(rateLimits, { perUser: deps.rateLimit, perAddress });
  await app.register(errorMapping, { bodyLimit: deps.bodyLimit });

  await app.register(probes, { ready: deps.ready });
  await app.register(openApiDocument);
  const handlerDeps: HandlerDeps = {
    nc: deps.nc,
    services: backingServices(deps.nc, deps.requestTimeoutMs),
    identity: deps.identity,
    closing: closing.signal,
    heartbeatMs: deps.heartbeatMs ?? HEARTBEAT_MS,
    followers: new Followers(deps.maxFollowersPerUser ?? MAX_FOLLOWERS_PER_USER),
    webhookSecret: deps.webhookSecret ?? null,
    refundAddress: (request) => perAddress.refund(request.ip),
    sessionSecret: deps.sessionSecret,
    sessionTtlSeconds: deps.sessionTtlSeconds ?? SESSION_TTL_SECONDS,
    githubSignInAllow: deps.githubSignInAllow ?? null,
  };
  for (const routes of ROUTES) await app.register(routes, handlerDeps);
  if (deps.consoleDir) await app.register(consoleRoutes, { dir: deps.consoleDir });

  return app;
}
