import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  ConfigError,
  loadConfig,
  natsAuthOf,
  natsAuthWithSeed,
  natsConfigShape,
  plaintextNatsProblem,
  type NatsAuth,
} from '@threadwork/platform';
import { z } from 'zod';
import { fail } from './fail.js';

/** The database and the NATS the CLI talks to, and where it learnt of them. */
export interface Target {
  mongoUrl: string;
  /** Where gateways hear of revocations; null when not known (they then notice within their cache TTL). */
  natsUrl: string | null;
  /** How the CLI connects to NATS, as the `admin` identity; null when it has no credentials. */
  natsAuth: NatsAuth | null;
  dbPrefix: string;
  source: string;
}

export function findTarget(): Target | null {
  const dbPrefix = process.env.MONGO_DB_PREFIX ?? 'threadwork';
  const natsUrl = process.env.NATS_URL ?? null;
  const natsAuth = natsAuthFromEnv();
  if (process.env.MONGO_URL) {
    return { mongoUrl: process.env.MONGO_URL, natsUrl, natsAuth, dbPrefix, source: 'MONGO_URL' };
  }
  const dataDir = resolve(process.env.THREADWORK_DATA_DIR ?? '.data');
  const stackFile = join(dataDir, 'stack.json');
  if (!existsSync(stackFile)) return null;
  const stack = JSON.parse(readFileSync(stackFile, 'utf8')) as {
    mongoUrl: string;
    natsUrl?: string;
    dbPrefix?: string;
  };
  return {
    mongoUrl: stack.mongoUrl,
    natsUrl: natsUrl ?? stack.natsUrl ?? null,
    natsAuth: natsAuth ?? stackNatsAuth(dataDir),
    dbPrefix: stack.dbPrefix ?? dbPrefix,
    source: stackFile,
  };
}

/** The admin identity's credentials from the environment (NATS_NKEY_SEED, NATS_CREDS, NATS_INSECURE). */
function natsAuthFromEnv(): NatsAuth | null {
  try {
    const config = loadConfig(z.object(natsConfigShape), process.env);
    // A revocation goes out over the same NATS as everything else, under the same rule.
    const plaintext = plaintextNatsProblem(config, process.env.NODE_ENV);
    if (plaintext) fail(`admin: ${plaintext}`);
    return natsAuthOf(config, 'admin');
  } catch (err) {
    if (err instanceof ConfigError && !/required/.test(err.message)) fail(`admin: ${err.message}`);
    return null;
  }
}

/** The admin identity's key that the local stack made (`npm start`), from its data directory. */
function stackNatsAuth(dataDir: string): NatsAuth | null {
  const file = join(dataDir, 'nats-keys.json');
  if (!existsSync(file)) return null;
  const keys = JSON.parse(readFileSync(file, 'utf8')) as Partial<Record<string, { seed?: string }>>;
  const seed = keys.admin?.seed;
  return seed ? natsAuthWithSeed(seed, 'admin') : null;
}
