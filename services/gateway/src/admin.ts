// Admin CLI: `npm run admin -- keys create --user <login>` and friends. Talks to the gateway's own
// collections directly: it works against the running local stack (found through the stack file
// that `npm start` writes into THREADWORK_DATA_DIR) or against the MONGO_URL it is given.
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { NATS_IDENTITIES, natsPermissions } from '@threadwork/contracts';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  ConfigError,
  connectMongo,
  connectNats,
  createLogger,
  loadConfig,
  natsAuthOf,
  plaintextNatsProblem,
  natsAuthorizationConfig,
  natsAuthWithSeed,
  natsConfigShape,
  natsPublicKeyOf,
  natsServerUsers,
  newNatsUserKey,
  NKEY_USER_SEED,
  type NatsKeys,
  foreignDatabaseProblem,
  redactMongoUrl,
  serviceDbName,
  type NatsAuth,
} from '@threadwork/platform';
import { z } from 'zod';
import { SESSION_COOKIE, signSession } from './domain/session.js';
import { announceRevocation } from './store/revocations.js';
import { createIdentityStore } from './store/identity.js';

const USAGE = `usage: npm run admin -- <command>
  keys create --user <login>   create the user if needed and print a new API key (last line)
  keys revoke <key id|prefix>  revoke a key
  keys list [--user <login>]   list keys (ids and prefixes, never the keys)
  users list                   list users
  sessions create --user <login> [--ttl-hours 24]
                               print a signed browser session cookie for the user (last line)
  nats keys --out <dir>        make an NKEY per NATS identity (keeping those already in <dir>, a
                               folder for its owner only): <identity>.seed for each, and authorization.conf,
                               the nats-server users with their grants; prints the chart's values
  nats permissions             print each NATS identity's grant as nats-server permissions (JSON;
                               the chart's files/nats-permissions.json)
environment: MONGO_URL and MONGO_DB_PREFIX, or THREADWORK_DATA_DIR of a running \`npm start\` (default ./.data);
  a revocation is announced to every gateway on NATS_URL (or the local stack's NATS), as the admin
  identity (NATS_NKEY_SEED or NATS_CREDS; the local stack's key is read from its data dir);
  sessions need SESSION_SECRET, the same value the gateway runs with (the local stack's is read from its data dir)`;

/** Sessions longer than this are refused: a signed cookie cannot be revoked before it expires. */
const MAX_SESSION_HOURS = 24 * 30;
const MIN_SECRET_LENGTH = 32;

interface Target {
  mongoUrl: string;
  /** Where gateways hear of revocations; null when not known (they then notice within their cache TTL). */
  natsUrl: string | null;
  /** How the CLI connects to NATS, as the `admin` identity; null when it has no credentials. */
  natsAuth: NatsAuth | null;
  dbPrefix: string;
  source: string;
}

function findTarget(): Target | null {
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

/**
 * A deployment's NATS identities: a seed per identity in `dir` (made when missing, kept when
 * there), and the server's `authorization` for their public keys with each identity's grant.
 */
function writeNatsKeys(dir: string): void {
  // The folder is what keeps the seeds private on this host (its owner only); the files themselves
  // are readable, as Compose mounts them into containers whose user is not their owner.
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const keys = {} as NatsKeys;
  for (const identity of NATS_IDENTITIES) {
    const file = join(dir, `${identity}.seed`);
    if (existsSync(file)) {
      const seed = readFileSync(file, 'utf8').trim();
      if (!NKEY_USER_SEED.test(seed))
        fail(`admin: ${file} does not hold an NKEY user seed; remove it to make a new one`);
      keys[identity] = { seed, publicKey: natsPublicKeyOf(seed) };
    } else {
      keys[identity] = newNatsUserKey();
      writeFileSync(file, `${keys[identity].seed}\n`, { mode: 0o644 });
    }
  }
  writeFileSync(join(dir, 'authorization.conf'), natsAuthorizationConfig(natsServerUsers(keys)));
  process.stderr.write(
    `admin: NATS keys in ${dir}: a seed per identity (give each service only its own), and authorization.conf for nats-server\n`,
  );
  // The chart's values: public keys only (the seeds go in the Secret named by nats.auth.existingSecret).
  const lines = ['nats:', '  auth:', '    publicKeys:'];
  for (const identity of NATS_IDENTITIES) lines.push(`      ${identity}: ${keys[identity].publicKey}`);
  process.stdout.write(`${lines.join('\n')}\n`);
}

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

async function main(): Promise<void> {
  const { positionals, values } = parseArgs({
    args: process.argv.slice(2),
    allowPositionals: true,
    options: {
      user: { type: 'string' },
      'ttl-hours': { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [group, action, arg] = positionals;
  if (values.help || !group) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (group === 'nats' && action === 'permissions') {
    const all = Object.fromEntries(NATS_IDENTITIES.map((identity) => [identity, natsPermissions(identity)]));
    process.stdout.write(`${JSON.stringify(all, null, 2)}\n`);
    return;
  }
  if (group === 'nats' && action === 'keys') {
    if (!values.out) fail(`admin: nats keys needs --out <dir>\n${USAGE}`);
    writeNatsKeys(resolve(values.out));
    return;
  }

  // Checked before touching the database: without the gateway's secret the cookie is useless.
  let sessionSecret = '';
  let ttlHours = 24;
  if (group === 'sessions') {
    // The local stack keeps its secret with its data, so cookies issued here work against it.
    const stackSecret = join(resolve(process.env.THREADWORK_DATA_DIR ?? '.data'), 'session.secret');
    sessionSecret =
      process.env.SESSION_SECRET ?? (existsSync(stackSecret) ? readFileSync(stackSecret, 'utf8').trim() : '');
    if (sessionSecret.length < MIN_SECRET_LENGTH) {
      fail(
        `admin: sessions need SESSION_SECRET (at least ${MIN_SECRET_LENGTH} characters), set to the value the gateway runs with`,
      );
    }
    if (values['ttl-hours'] !== undefined) {
      ttlHours = Number(values['ttl-hours']);
      if (!Number.isFinite(ttlHours) || ttlHours <= 0 || ttlHours > MAX_SESSION_HOURS) {
        fail(`admin: --ttl-hours must be a number of hours between 0 and ${MAX_SESSION_HOURS}`);
      }
    }
  }

  const target = findTarget();
  if (!target) {
    fail(
      'admin: no database to talk to: start the local stack with `npm start` (same THREADWORK_DATA_DIR), or set MONGO_URL.',
    );
  }
  // Users and keys are the gateway's: the CLI connects as the gateway does, with its connection string.
  const foreign = foreignDatabaseProblem(target.mongoUrl, serviceDbName(target.dbPrefix, 'gateway'));
  if (foreign) fail(`admin: MONGO_URL ${foreign}: give the admin CLI the gateway's connection string`);
  const client = await connectMongo({
    url: target.mongoUrl,
    appName: 'threadwork-admin',
    serverSelectionTimeoutMs: 3_000,
  }).catch((err: Error) =>
    fail(
      `admin: cannot reach the database at ${redactMongoUrl(target.mongoUrl)} (from ${target.source}): ${err.message}. Is \`npm start\` running?`,
    ),
  );
  try {
    const identity = createIdentityStore(client.db(serviceDbName(target.dbPrefix, 'gateway')));
    await identity.ensureIndexes();
    const out = (line: string) => process.stdout.write(`${line}\n`);

    if (group === 'keys' && action === 'create') {
      if (!values.user) fail('admin: keys create needs --user <login>');
      const user = await identity.ensureUser(values.user);
      const created = await identity.createKey(user._id);
      out(
        `created key ${created.id} (prefix ${created.prefix}) for ${user.login} (${user._id}); it is shown only once:`,
      );
      out(created.key);
    } else if (group === 'keys' && action === 'revoke') {
      if (!arg) fail('admin: keys revoke needs a key id or prefix');
      const count = await identity.revokeKey(arg);
      if (count === 0) fail(`admin: no active key matches ${arg}`);
      out(`revoked ${count} key${count === 1 ? '' : 's'}`);
      await tellGateways(target.natsUrl, target.natsAuth);
    } else if (group === 'keys' && action === 'list') {
      const users = await identity.listUsers();
      const user = values.user ? users.find((u) => u.login === values.user) : undefined;
      if (values.user && !user) fail(`admin: no user ${values.user}`);
      const logins = new Map(users.map((u) => [u._id, u.login]));
      for (const key of await identity.listKeys(user?._id)) {
        out(
          `${key._id}\t${key.prefix}…\t${logins.get(key.user_id) ?? key.user_id}\t${key.created_at.toISOString()}\t${key.revoked_at ? `revoked ${key.revoked_at.toISOString()}` : 'active'}`,
        );
      }
    } else if (group === 'sessions' && action === 'create') {
      if (!values.user) fail('admin: sessions create needs --user <login>');
      const user = await identity.ensureUser(values.user);
      const expiresAt = Math.floor(Date.now() / 1000 + ttlHours * 3600);
      const value = signSession(user._id, expiresAt, sessionSecret);
      out(
        `session for ${user.login} (${user._id}) until ${new Date(expiresAt * 1000).toISOString()}; send it as this header:`,
      );
      out(`Cookie: ${SESSION_COOKIE}=${value}`);
    } else if (group === 'users' && action === 'list') {
      for (const user of await identity.listUsers())
        out(`${user._id}\t${user.login}\t${user.created_at.toISOString()}`);
    } else {
      fail(`admin: unknown command "${positionals.join(' ')}"\n${USAGE}`);
    }
  } finally {
    await client.close();
  }
}

/** Announces a revocation to every gateway; without NATS they refuse the key within AUTH_CACHE_TTL_MS. */
async function tellGateways(natsUrl: string | null, auth: NatsAuth | null): Promise<void> {
  const late = 'gateways that remembered the key refuse it within AUTH_CACHE_TTL_MS (10 s by default)';
  if (!natsUrl) {
    process.stderr.write(`admin: NATS_URL is not set, so the revocation is not announced: ${late}\n`);
    return;
  }
  if (!auth) {
    process.stderr.write(
      `admin: no NATS credentials (NATS_NKEY_SEED or NATS_CREDS of the admin identity), so the revocation is not announced: ${late}\n`,
    );
    return;
  }
  try {
    const nc = await connectNats({
      servers: natsUrl,
      auth,
      name: 'threadwork-admin',
      logger: createLogger({ service: 'admin', level: 'silent' }),
      giveUpAfterMs: 3_000,
    });
    try {
      await announceRevocation(nc);
    } finally {
      await nc.close();
    }
  } catch (err) {
    process.stderr.write(`admin: the revocation could not be announced (${(err as Error).message}): ${late}\n`);
  }
}

main().catch((err: unknown) => fail(`admin: ${err instanceof Error ? err.message : String(err)}`));
