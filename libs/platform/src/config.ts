import { z } from 'zod';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Parses environment variables with a zod schema. A bad or missing value becomes one line that
 * names the variable, e.g. `invalid configuration: PORT: expected number, received "abc"`.
 */
export function loadConfig<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined> = process.env,
): z.output<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const name = issue.path.join('.') || '(root)';
    const value = issue.path.length === 1 ? env[String(issue.path[0])] : undefined;
    return value === undefined
      ? `${name}: ${issue.message}`
      : `${name}: ${issue.message} (got ${JSON.stringify(value)})`;
  });
  throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
}

/** An NKEY user seed: `SU` and 56 base32 characters. */
export const NKEY_USER_SEED = /^SU[A-Z2-7]{56}$/;

/** Common building blocks for service config schemas. */
export const env = {
  port: (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback),
  url: () => z.string().url(),
  bool: (fallback: boolean) =>
    z
      .enum(['1', '0', 'true', 'false', 'yes', 'no', ''])
      .default(fallback ? '1' : '0')
      .transform((v) => v === '1' || v === 'true' || v === 'yes'),
  duration: (fallbackMs: number) => z.coerce.number().int().min(0).default(fallbackMs),
  logLevel: () => z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
};

/**
 * How long a database operation waits for a server by default: below the gateway's request
 * timeout (5 s), so during an outage a service answers `unavailable` itself before its caller
 * gives up on it.
 */
export const DEFAULT_MONGO_SERVER_SELECTION_TIMEOUT_MS = 3_000;

/** Settings of every NATS client. Spread into a service's config schema. */
export const natsConfigShape = {
  /** NATS server URL(s), comma-separated. */
  NATS_URL: z.string().min(1).default('nats://127.0.0.1:4222'),
  /** This process's NKEY seed (`SU…`): it signs the server's challenge; the server knows its public key. */
  NATS_NKEY_SEED: z
    .string()
    .regex(NKEY_USER_SEED, 'an NKEY user seed (SU followed by 56 base32 characters)')
    .optional(),
  /** A file holding the seed (a mounted secret), instead of NATS_NKEY_SEED. */
  NATS_NKEY_SEED_FILE: z.string().min(1).optional(),
  /** A NATS credentials file (user JWT and seed), instead of NATS_NKEY_SEED. */
  NATS_CREDS: z.string().min(1).optional(),
  /** TLS to NATS: the CA to trust, and this client's certificate and key for mutual TLS. */
  NATS_TLS_CA: z.string().min(1).optional(),
  NATS_TLS_CERT: z.string().min(1).optional(),
  NATS_TLS_KEY: z.string().min(1).optional(),
  /** Connect without credentials, to a NATS that has no authorization: for development only. */
  NATS_INSECURE: env.bool(false),
  /**
   * With NODE_ENV=production, NATS must be reached over TLS (a tls:// URL or NATS_TLS_CA) unless it
   * is on this host: replies carry tokens, prompts and answers. `true` accepts a network that
   * encrypts on its own (a service mesh with mutual TLS); it is logged at start.
   */
  NATS_ALLOW_PLAINTEXT: env.bool(false),
  /**
   * How many NATS servers keep each stream (RUN_EVENTS, RUN_JOBS, DOMAIN): 3 on a cluster of three
   * or more, so losing one loses nothing. Applied when the runs service creates the streams and
   * raised on existing ones when it grows; never lowered (a smaller value is logged and ignored).
   */
  NATS_STREAM_REPLICAS: z.coerce.number().int().min(1).max(5).default(1),
  /**
   * How long a JetStream publish keeps retrying a timeout or "no responders" (a stream leader's
   * election takes about two seconds) before the operation fails `unavailable`. Retries carry the
   * same Nats-Msg-Id, so it must stay well inside the streams' two-minute duplicate window.
   */
  NATS_PUBLISH_RETRY_MS: z.coerce.number().int().min(0).max(60_000).default(15_000),
};

/** Settings every service shares, the runner included. Spread into a service's own schema. */
export const processConfigShape = {
  ...natsConfigShape,
  /** pino level. */
  LOG_LEVEL: env.logLevel(),
  /** Port of the /healthz and /readyz endpoints; 0 disables them (tests, local stack). */
  HEALTH_PORT: env.port(0),
  /** How long SIGTERM waits for in-flight work before the process exits. */
  SHUTDOWN_TIMEOUT_MS: env.duration(10_000),
};

/** Settings of a service that owns collections: the database. The runner has none (least privilege). */
export const databaseConfigShape = {
  /** MongoDB connection string (FerretDB works for development and tests). */
  MONGO_URL: z.string().min(1).default('mongodb://127.0.0.1:27017/'),
  /** Prefix of every database name this deployment uses; tests set a unique one per run. */
  MONGO_DB_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,32}$/)
    .default('threadwork'),
  /**
   * How long a database operation waits for a server (or a new connection to it) before it fails
   * `unavailable` (the API answers 503). Keep it below the gateway's REQUEST_TIMEOUT_MS.
   */
  MONGO_SERVER_SELECTION_TIMEOUT_MS: z.coerce.number().int().min(1).default(DEFAULT_MONGO_SERVER_SELECTION_TIMEOUT_MS),
};

/** Settings of a service that owns collections. */
export const baseConfigShape = { ...processConfigShape, ...databaseConfigShape };

export const ProcessConfig = z.object(processConfigShape);
export type ProcessConfig = z.output<typeof ProcessConfig>;
export const BaseConfig = z.object(baseConfigShape);
export type BaseConfig = z.output<typeof BaseConfig>;
