import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { isWellFormedKey } from '../domain/keys.js';
import { FailureLimiter } from '../domain/per-address-limit.js';
import type { RateLimit } from '../domain/rate-limit.js';
import { readCookie, SESSION_COOKIE, verifySession } from '../domain/session.js';
import { AUTH_PROVIDERS_PATH, GITHUB_CALLBACK_PATH, GITHUB_SIGN_IN_PATH } from '../domain/github-sign-in.js';
import { LOGIN_PATH } from '../domain/login-links.js';
import { sessionEpochOf, type IdentityStore, type UserDoc } from '../store/identity.js';
import { sendError } from './errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    user: UserDoc | null;
    /** How `user` proved itself: a session cookie, an API key, or (public paths) not at all. */
    via: Via | null;
  }
}

export type Via = 'session' | 'api_key';

/** Who a request acts for, and how it proved it. */
interface Authenticated {
  user: UserDoc;
  via: Via;
}

export interface AuthOptions {
  identity: IdentityStore;
  /** Key that signs `tw_session` cookies. */
  sessionSecret: string;
  /** API keys that match no one, per client address, per replica (AUTH_FAILURES_*). */
  authFailureLimit?: RateLimit;
}

/** Where the OpenAPI document is served (public). */
export const OPENAPI_PATH = '/v1/openapi.json';

/** Paths under /v1 that prove themselves another way (or are public documents). */
export const PUBLIC_PATHS: ReadonlySet<string> = new Set([
  OPENAPI_PATH,
  '/v1/repohost/setup',
  '/v1/repohost/webhooks',
  LOGIN_PATH,
  AUTH_PROVIDERS_PATH,
  GITHUB_SIGN_IN_PATH,
  GITHUB_CALLBACK_PATH,
]);

/**
 * What a request was routed by: its route's pattern when one matched. The router decodes
 * percent-escapes (`/%761/harnesses` is `/v1/harnesses`) and takes absolute-form targets
 * (`GET http://host/v1/…`), so deciding on the raw URL would let such spellings of a path pass as
 * another; a decision on the path is made on this, and on the raw path only where no route matched
 * (or the console's catch-all did, which hands `/v1` paths to the 404).
 */
export function routedPath(request: FastifyRequest): { route: string | null; raw: string } {
  return { route: request.routeOptions.url ?? null, raw: request.url.split('?')[0] ?? '' };
}

/** Whether a request needs a caller: anything routed or addressed under /v1 but the public paths. */
function needsCaller(request: FastifyRequest): boolean {
  const { route, raw } = routedPath(request);
  if (route !== null && PUBLIC_PATHS.has(route)) return false;
  return route?.startsWith('/v1/') === true || raw.startsWith('/v1/');
}

/** Methods a cross-site page can trigger with the browser's cookies but must not. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

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

function bearerKey(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
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
  options: AuthOptions,
  guesses: FailureLimiter,
): Promise<UserDoc | null> {
  if (!isWellFormedKey(key)) return null;
  const known = options.identity.remembered?.(key);
  if (known) return known;
  const attempt = guesses.begin(request.ip);
  if (!attempt.allowed) throw new AddressLimited(attempt.retryAfterSeconds);
  let unknown = false;
  try {
    const user = await options.identity.authenticate(key);
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
  options: AuthOptions,
  guesses: FailureLimiter,
): Promise<Authenticated | null> {
  const authorization = request.headers.authorization;
  if (authorization !== undefined) {
    const key = bearerKey(authorization);
    const user = key ? await authenticateKey(key, request, options, guesses) : null;
    return user && { user, via: 'api_key' };
  }
  const session = readCookie(request.headers.cookie, SESSION_COOKIE);
  if (session === null) return null;
  const claims = verifySession(session, options.sessionSecret, Math.floor(Date.now() / 1000));
  if (claims === null) return null;
  // A browser session must not be usable by another page (CSRF): browsers say where a request
  // comes from in Sec-Fetch-Site, and a write must come from the API's own origin. `same-site` is
  // not enough: a sibling subdomain is the same site, and it may be anyone's. Without the header
  // (older browsers, clients that are not browsers) the cookie's SameSite attribute is the guard.
  const site = request.headers['sec-fetch-site'];
  if (!SAFE_METHODS.has(request.method) && site !== undefined && site !== 'same-origin') return null;
  // Looked up on every request, never remembered: signing out raises the user's epoch in the
  // database, and every replica refuses the older cookies from the next request on.
  const user = await options.identity.findUser(claims.userId);
  if (!user || sessionEpochOf(user) !== claims.epoch) return null;
  return { user, via: 'session' };
}

/**
 * Authentication before any other work: every path under /v1 but the public ones needs an API key
 * or a session cookie, else 401 (or 429 for an address that guesses keys). Sets `request.user` and
 * `request.via` (null on the public paths).
 */
export const authentication = fp<AuthOptions>(
  async (app, options) => {
    const guesses = new FailureLimiter(
      options.authFailureLimit ?? AUTH_FAILURE_LIMIT,
      KEY_LOOKUPS_IN_FLIGHT_PER_ADDRESS,
    );
    app.decorateRequest('user', null);
    app.decorateRequest('via', null);

    /** True when the request has been answered here. */
    const guard = async (request: FastifyRequest, reply: FastifyReply): Promise<boolean> => {
      let found: Authenticated | null;
      try {
        found = await authenticate(request, options, guesses);
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
      if (!found) {
        await reply.code(401).send({ error: 'Unauthorized' });
        return true;
      }
      request.user = found.user;
      request.via = found.via;
      return false;
    };

    // Callback style, so probes and public paths pass without a promise or a tick.
    app.addHook('onRequest', (request, reply, done) => {
      if (!needsCaller(request)) {
        done();
        return;
      }
      guard(request, reply).then(
        (answered) => {
          if (!answered) done();
        },
        (err: unknown) => done(err instanceof Error ? err : new Error(String(err))),
      );
    });
  },
  { name: 'authentication' },
);
