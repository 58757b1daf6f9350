import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

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
