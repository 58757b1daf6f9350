import fp from 'fastify-plugin';
import type { PerAddressLimiter } from '../domain/per-address-limit.js';
import { TokenBuckets, type RateLimit } from '../domain/rate-limit.js';
import { OPENAPI_PATH, PUBLIC_PATHS, routedPath } from './auth.js';
import { sendError } from './errors.js';

/**
 * The public paths that reach a backing service — all but the OpenAPI document, served from memory
 * — limited per client address before any other work (the body of a webhook is not read yet; a
 * login link's token costs a database lookup).
 */
const ADDRESS_LIMITED_PATHS: ReadonlySet<string> = new Set([...PUBLIC_PATHS].filter((path) => path !== OPENAPI_PATH));

/** Per client address, per replica, on the unauthenticated paths that reach a backing service. */
export const PUBLIC_RATE_LIMIT: RateLimit = { perSecond: 5, burst: 50 };

export interface RateLimitOptions {
  /** Per caller, per replica. */
  perUser: RateLimit;
  /** Per client address on the public paths; shared with the routes, which give a token back. */
  perAddress: PerAddressLimiter;
}

/**
 * A token bucket per caller on the authenticated paths (after authentication has named the caller),
 * and one per client address on the public paths that reach a backing service: 429 `rate_limited`
 * with `Retry-After` past either.
 */
export const rateLimits = fp<RateLimitOptions>(
  async (app, { perUser, perAddress }) => {
    const buckets = new TokenBuckets(perUser);
    // Callback style, so probes and public paths pass without a promise or a tick.
    app.addHook('onRequest', (request, reply, done) => {
      if (request.user) {
        const decision = buckets.take(request.user._id, Date.now());
        if (!decision.allowed) {
          reply.header('retry-after', String(decision.retryAfterSeconds));
          void sendError(reply, 429, 'rate_limited', `too many requests; retry in ${decision.retryAfterSeconds} s`);
          return;
        }
        done();
        return;
      }
      const { route, raw } = routedPath(request);
      if (ADDRESS_LIMITED_PATHS.has(route ?? raw)) {
        const decision = perAddress.take(request.ip);
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
    });
  },
  { name: 'rate-limits', dependencies: ['authentication'] },
);
