import { readFileSync } from 'node:fs';
import { createUser, fromSeed } from '@nats-io/nkeys';
import {
  inboxPrefix,
  natsPermissions,
  NATS_IDENTITIES,
  type NatsIdentity,
  type NatsPermissions,
} from '@threadwork/contracts';
import { credsAuthenticator, nkeyAuthenticator, type Authenticator } from '@nats-io/nats-core';
import { ConfigError, NKEY_USER_SEED, type ProcessConfig } from './config.js';

// How a process proves who it is to NATS, and how a server is told who may do what: every
// service connects with an NKEY of its own (or a creds file, for an operator-run NATS with
// accounts), and the server grants each only what libs/contracts' table says (nats-grants.ts).

type NatsConfig = Pick<
  ProcessConfig,
  | 'NATS_NKEY_SEED'
  | 'NATS_NKEY_SEED_FILE'
  | 'NATS_CREDS'
  | 'NATS_TLS_CA'
  | 'NATS_TLS_CERT'
  | 'NATS_TLS_KEY'
  | 'NATS_INSECURE'
>;

/** How one process connects: credentials, TLS, and the reply prefix only its identity may read. */
export interface NatsAuth {
  authenticator?: Authenticator;
  tls?: { caFile?: string; certFile?: string; keyFile?: string };
  inboxPrefix?: string;
  /** Said in the start log: how this process authenticated. */
  method: 'nkey' | 'creds' | 'none';
}

/** The connection settings of `identity` from its config; a ConfigError when it has no credentials. */
export function natsAuthOf(config: NatsConfig, identity: NatsIdentity): NatsAuth {
  const tls =
    config.NATS_TLS_CA || config.NATS_TLS_CERT || config.NATS_TLS_KEY
      ? {
          ...(config.NATS_TLS_CA ? { caFile: config.NATS_TLS_CA } : {}),
          ...(config.NATS_TLS_CERT ? { certFile: config.NATS_TLS_CERT } : {}),
          ...(config.NATS_TLS_KEY ? { keyFile: config.NATS_TLS_KEY } : {}),
        }
      : undefined;
  const base = { inboxPrefix: inboxPrefix(identity), ...(tls ? { tls } : {}) };
  const given = [config.NATS_NKEY_SEED, config.NATS_NKEY_SEED_FILE, config.NATS_CREDS].filter(Boolean);
  if (given.length > 1) {
    throw new ConfigError('invalid configuration: NATS_NKEY_SEED, NATS_NKEY_SEED_FILE and NATS_CREDS: set one only');
  }
  const seed = config.NATS_NKEY_SEED ?? (config.NATS_NKEY_SEED_FILE ? seedFromFile(config.NATS_NKEY_SEED_FILE) : null);
  if (seed) return { ...base, authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)), method: 'nkey' };
  if (config.NATS_CREDS) {
    let creds: Uint8Array;
    try {
      creds = readFileSync(config.NATS_CREDS);
    } catch (err) {
      throw new ConfigError(
        `invalid configuration: NATS_CREDS: cannot read ${config.NATS_CREDS}: ${(err as Error).message}`,
      );
    }
    return { ...base, authenticator: credsAuthenticator(creds), method: 'creds' };
  }
  if (config.NATS_INSECURE) return { ...base, method: 'none' };
  throw new ConfigError(
    'invalid configuration: NATS_NKEY_SEED or NATS_CREDS is required (NATS_INSECURE=true connects without credentials, for development only)',
  );
}

type TransportConfig = Pick<ProcessConfig, 'NATS_URL' | 'NATS_TLS_CA' | 'NATS_TLS_CERT' | 'NATS_ALLOW_PLAINTEXT'>;

const LOOPBACK_HOST = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

/** The servers of NATS_URL that would be reached in clear over a network (not TLS, not this host). */
export function plaintextNatsServers(config: Omit<TransportConfig, 'NATS_ALLOW_PLAINTEXT'>): string[] {
  // A TLS option makes the client insist on TLS with every server.
  if (config.NATS_TLS_CA || config.NATS_TLS_CERT) return [];
  return config.NATS_URL.split(',')
    .map((server) => server.trim())
    .filter((server) => {
      // The client takes `host:port` as nats://host:port.
      const withScheme = server.includes('://') ? server : `nats://${server}`;
      if (!URL.canParse(withScheme)) return true;
      const url = new URL(withScheme);
      if (url.protocol === 'tls:' || url.protocol === 'wss:') return false;
      return !LOOPBACK_HOST.test(url.hostname);
    });
}

/**
 * Why this process may not connect to NATS as configured, or null. In production, NATS carries
 * what must not cross a network in clear (installation tokens, prompts, answers), so a server off
 * this host must be reached over TLS unless NATS_ALLOW_PLAINTEXT says the network encrypts itself.
 */
export function plaintextNatsProblem(config: TransportConfig, nodeEnv: string | undefined): string | null {
  if (nodeEnv !== 'production' || config.NATS_ALLOW_PLAINTEXT) return null;
  const clear = plaintextNatsServers(config);
  if (clear.length === 0) return null;
  return `NATS_URL: ${clear.join(', ')} would be reached without TLS; with NODE_ENV=production use a tls:// URL or NATS_TLS_CA, or set NATS_ALLOW_PLAINTEXT=true for a network that encrypts on its own (a service mesh with mutual TLS)`;
}

function seedFromFile(file: string): string {
  let seed: string;
  try {
    seed = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new ConfigError(`invalid configuration: NATS_NKEY_SEED_FILE: cannot read ${file}: ${(err as Error).message}`);
  }
  if (!NKEY_USER_SEED.test(seed)) {
    throw new ConfigError(`invalid configuration: NATS_NKEY_SEED_FILE: ${file} does not hold an NKEY user seed`);
  }
  return seed;
}

/** A new NKEY user: the seed is the process's secret, the public key goes in the server's config. */
export interface NatsUserKey {
  seed: string;
  publicKey: string;
}

export function newNatsUserKey(): NatsUserKey {
  const pair = createUser();
  return { seed: new TextDecoder().decode(pair.getSeed()), publicKey: pair.getPublicKey() };
}

/** The public key of a seed (to check a stored key pair, or render a server config from seeds). */
export function natsPublicKeyOf(seed: string): string {
  return fromSeed(new TextEncoder().encode(seed)).getPublicKey();
}

/** One user of the server's `authorization` block. */
export interface NatsServerUser {
  nkey: string;
  permissions: NatsPermissions | { publish: { allow: string[] }; subscribe: { allow: string[] } };
}

/** A key per identity, as generated by the local stack and the tests. */
export type NatsKeys = Record<NatsIdentity, NatsUserKey>;

export function newNatsKeys(): NatsKeys {
  return Object.fromEntries(NATS_IDENTITIES.map((identity) => [identity, newNatsUserKey()])) as NatsKeys;
}

/**
 * The server's users for these keys, each with its identity's grant; `extra` adds users of the
 * caller's (the tests' own client, which may do anything).
 */
export function natsServerUsers(keys: NatsKeys, opts: { extra?: readonly NatsServerUser[] } = {}): NatsServerUser[] {
  return [
    ...NATS_IDENTITIES.map((identity) => ({
      nkey: keys[identity].publicKey,
      permissions: natsPermissions(identity),
    })),
    ...(opts.extra ?? []),
  ];
}

/** The nats-server configuration that admits these users only (its conf format reads JSON values). */
export function natsAuthorizationConfig(users: readonly NatsServerUser[]): string {
  return `authorization: ${JSON.stringify({ users }, null, 2)}\n`;
}

/** A user that may publish and subscribe anything: a test's own client, never a deployment's. */
export function unrestrictedNatsUser(key: NatsUserKey): NatsServerUser {
  return { nkey: key.publicKey, permissions: { publish: { allow: ['>'] }, subscribe: { allow: ['>'] } } };
}

/** How a client with just a seed connects (a test's own client, the admin CLI's fallback). */
export function natsAuthWithSeed(seed: string, identity?: NatsIdentity): NatsAuth {
  return {
    authenticator: nkeyAuthenticator(new TextEncoder().encode(seed)),
    ...(identity ? { inboxPrefix: inboxPrefix(identity) } : {}),
    method: 'nkey',
  };
}
