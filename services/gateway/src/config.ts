import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';
import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';
import { parseSignInAllow } from './domain/github-sign-in.js';

/** fastify's `trustProxy`: believe no proxy, every one, so many hops, or the proxies at these addresses. */
export type TrustProxy = boolean | number | string[];

/** TRUST_PROXY as fastify takes it, or why it cannot be. */
export function parseTrustProxy(value: string): { value: TrustProxy } | string {
  const text = value.trim();
  if (text === '' || text === 'false' || text === '0') return { value: false };
  if (text === 'true') return { value: true };
  if (/^\d+$/.test(text)) return { value: Number(text) };
  const entries = text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  for (const entry of entries) {
    // proxy-addr's names: 127.0.0.0/8 and ::1, 169.254.0.0/16 and fe80::/10, the private ranges.
    if (['loopback', 'linklocal', 'uniquelocal'].includes(entry)) continue;
    const [address = '', bits, extra] = entry.split('/');
    const family = isIP(address);
    const maxBits = family === 6 ? 128 : 32;
    const badBits = bits !== undefined && (!/^\d{1,3}$/.test(bits) || Number(bits) > maxBits);
    if (family === 0 || badBits || extra !== undefined) {
      return `${JSON.stringify(entry)} is not an address or CIDR (expected false, true, a number of hops, or addresses, CIDRs and loopback/linklocal/uniquelocal of the proxies)`;
    }
  }
  return { value: entries };
}

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
     * API keys that match no user, per second, that one client address may present (refilled
     * continuously, per replica): each costs a database lookup, so past it the address is answered
     * 429 `rate_limited` without one. Only unknown keys count; keys this replica accepted recently
     * pass without a lookup.
     */
    AUTH_FAILURES_PER_SECOND: z.coerce.number().positive().default(0.5),
    /** Unknown keys one client address may present at once before AUTH_FAILURES_PER_SECOND applies. */
    AUTH_FAILURES_BURST: z.coerce.number().int().min(1).default(20),
    /**
     * Which proxies in front of the gateway are trusted to say who the client is (X-Forwarded-For),
     * as fastify's `trustProxy`: `false` (the default: the client is whoever connected), a number of
     * proxy hops, or comma-separated addresses, CIDRs and named ranges (`loopback`, `linklocal`,
     * `uniquelocal`) of the proxies; `true` believes any X-Forwarded-For, which a client can write
     * itself — only where nothing but the proxy can connect. The client address feeds the per-address limits and the request log.
     */
    TRUST_PROXY: z
      .string()
      .default('false')
      .transform((value, ctx): TrustProxy => {
        const parsed = parseTrustProxy(value);
        if (typeof parsed === 'string') {
          ctx.addIssue({ code: 'custom', message: parsed });
          return z.NEVER;
        }
        return parsed.value;
      }),
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
     * The GitHub App's webhook secret (the one repohost reads): every delivery's
     * `X-Hub-Signature-256` is checked here before anything is sent on NATS. Unset, every delivery
     * is refused with 401.
     */
    GITHUB_WEBHOOK_SECRET: z.preprocess((value) => (value === '' ? undefined : value), z.string().min(1).optional()),
    /**
     * Who may sign in with GitHub: `*` (anyone with a GitHub account — a public GitHub App lets
     * anyone run agents on this deployment's model key), or GitHub logins and numeric user ids,
     * comma-separated. Empty (the default): sign-in with GitHub is off, whatever repohost offers.
     */
    GITHUB_SIGN_IN_ALLOW: z
      .string()
      .default('')
      .superRefine((value, ctx) => {
        try {
          parseSignInAllow(value);
        } catch (err) {
          ctx.addIssue({ code: 'custom', message: (err as Error).message });
        }
      }),
    /** Event streams and long-polls one user may hold open at once, per replica; past it 429 `too_many_streams`. */
    MAX_FOLLOWERS_PER_USER: z.coerce.number().int().min(1).default(32),
    /**
     * Key that signs `tw_session` cookies (at least 32 characters; the admin CLI must use the same
     * one). Required in production; elsewhere a random one is made at start, so cookies issued
     * before a restart stop working.
     */
    SESSION_SECRET: z.string().min(32).optional(),
    /**
     * The built web console (console/dist), served at `/`; empty serves the API only. A folder
     * without index.html is logged and skipped, so a gateway built without the console still runs.
     */
    CONSOLE_DIR: z.string().default(fileURLToPath(new URL('../../../console/dist', import.meta.url))),
    /**
     * How long a session made from a login link lasts, in hours (up to 30 days; signing out ends it
     * sooner, on every replica).
     */
    SESSION_TTL_HOURS: z.coerce.number().int().min(1).max(720).default(168),
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
