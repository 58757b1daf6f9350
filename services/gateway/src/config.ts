import { isIP } from 'node:net';
import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

/** An address or a CIDR range (`10.0.0.0/8`, `fd00::/8`). */
const isAddressOrRange = (entry: string): boolean => {
  const [address = '', bits, ...rest] = entry.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  if (bits === undefined) return true;
  const n = Number(bits);
  return /^\d+$/.test(bits) && n <= (family === 4 ? 32 : 128);
};

/** proxy-addr's names for ranges: 127.0.0.0/8 and ::1, 169.254.0.0/16 and fe80::/10, private ranges. */
const NAMED_RANGES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * Which proxies in front of the gateway are believed when they name the client in
 * `X-Forwarded-For` (fastify's `trustProxy`): `false` (none: the client is the peer address),
 * `true` (any: only when nothing can reach the gateway but the proxy), or the proxies' addresses,
 * CIDR ranges and named ranges. A hop count is not offered: fastify cannot check the peer with one.
 */
const TrustProxy = z.preprocess(
  (value) => (value === '' ? undefined : value),
  z
    .string()
    .default('false')
    .transform((value, ctx): boolean | string[] => {
      const v = value.trim().toLowerCase();
      if (v === 'false' || v === 'no') return false;
      if (v === 'true' || v === 'yes') return true;
      const entries = v.split(',').map((entry) => entry.trim());
      const bad = entries.find((entry) => !NAMED_RANGES.has(entry) && !isAddressOrRange(entry));
      if (bad !== undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `"${bad}" is not an address, CIDR range or named range (expected true, false, or addresses, ranges and loopback/linklocal/uniquelocal, comma-separated)`,
        });
        return z.NEVER;
      }
      return entries;
    }),
);

export const GatewayConfig = z
  .object({
    ...baseConfigShape,
    /** Port of the public HTTP API. */
    PORT: env.port(8080),
    /** Address to bind; 0.0.0.0 in a container, loopback for a laptop. */
    HOST: z.string().min(1).default('0.0.0.0'),
    /** How long the gateway waits for a backing service before answering 503. */
    REQUEST_TIMEOUT_MS: env.duration(5_000),
    /**
     * How long an accepted API key is remembered per replica (0: looked up on every request). A key
     * revoked with the admin CLI keeps working on a replica for up to this long.
     */
    AUTH_CACHE_TTL_MS: z.coerce.number().int().min(0).max(300_000).default(10_000),
    /** Largest request body accepted (413 above it). */
    BODY_LIMIT_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .default(1024 * 1024),
    /**
     * Requests per second each caller (user) may make, refilled continuously. Kept in memory per
     * gateway replica, so with N replicas behind a balancer a caller gets up to N times this.
     */
    RATE_LIMIT_PER_SECOND: z.coerce.number().positive().default(20),
    /** Requests a caller may make at once before the per-second rate applies (bucket size). */
    RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(100),
    /**
     * Requests per second each client address may make to the unauthenticated paths that reach a
     * backing service (GitHub's setup callback and webhooks), per replica. A webhook delivery that
     * is accepted gives its token back, so GitHub's own deliveries are never held back by it: the
     * limit bounds the work of everything that does not prove itself. IPv6 clients count per /64.
     */
    PUBLIC_RATE_LIMIT_PER_SECOND: z.coerce.number().positive().default(5),
    /** Such requests a client address may make at once before the per-second rate applies. */
    PUBLIC_RATE_LIMIT_BURST: z.coerce.number().int().min(1).default(50),
    /**
     * The proxies believed about the client address (`X-Forwarded-For`), which the public paths'
     * rate limit keys on: `false` (default: the peer address), `true` (any; only when the gateway
     * is reachable through the proxy alone), or the proxies' addresses, CIDR ranges and named
     * ranges (`loopback`, `linklocal`, `uniquelocal`), comma-separated — e.g. the ingress
     * controller's pod network.
     */
    TRUST_PROXY: TrustProxy,
    /**
     * The GitHub App's webhook secret (the one repohost reads): every delivery's
     * `X-Hub-Signature-256` is checked here before anything is sent on NATS. Unset, every delivery
     * is refused with 401.
     */
    GITHUB_WEBHOOK_SECRET: z.preprocess((value) => (value === '' ? undefined : value), z.string().min(1).optional()),
    /** Event streams and long-polls one user may hold open at once, per replica; past it 429 `rate_limited`. */
    MAX_FOLLOWERS_PER_USER: z.coerce.number().int().min(1).default(32),
    /**
     * Key that signs `tw_session` cookies (at least 32 characters; the admin CLI must use the same
     * one). Required in production; elsewhere a random one is made at start, so cookies issued
     * before a restart stop working.
     */
    SESSION_SECRET: z.string().min(32).optional(),
    /** `production` makes SESSION_SECRET mandatory. */
    NODE_ENV: z.string().default('development'),
  })
  .superRefine((config, ctx) => {
    if (config.NODE_ENV === 'production' && !config.SESSION_SECRET) {
      ctx.addIssue({
        code: 'custom',
        path: ['SESSION_SECRET'],
        message: 'required when NODE_ENV=production (at least 32 characters)',
      });
    }
  });
export type GatewayConfig = z.output<typeof GatewayConfig>;
