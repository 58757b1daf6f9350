// Admin CLI: `npm run admin -- keys create --user <login>` and friends. Talks to the gateway's own
// collections directly: it works against the running local stack (found through the stack file
// that `npm start` writes into THREADWORK_DATA_DIR) or against the MONGO_URL it is given.
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { connectMongo, connectNats, createLogger, serviceDbName } from '@threadwork/platform';
import { SESSION_COOKIE, signSession } from './domain/session.js';
import { announceRevocation } from './revocations.js';
import { createIdentityStore } from './store/identity.js';

const USAGE = `usage: npm run admin -- <command>
  keys create --user <login>   create the user if needed and print a new API key (last line)
  keys revoke <key id|prefix>  revoke a key
  keys list [--user <login>]   list keys (ids and prefixes, never the keys)
  users list                   list users
  sessions create --user <login> [--ttl-hours 24]
                               print a signed browser session cookie for the user (last line)
environment: MONGO_URL and MONGO_DB_PREFIX, or THREADWORK_DATA_DIR of a running \`npm start\` (default ./.data);
  a revocation is announced to every gateway on NATS_URL (or the local stack's NATS);
  sessions need SESSION_SECRET, the same value the gateway runs with (the local stack's is read from its data dir)`;

/** Sessions longer than this are refused: a signed cookie cannot be revoked before it expires. */
const MAX_SESSION_HOURS = 24 * 30;
const MIN_SECRET_LENGTH = 32;

interface Target {
  mongoUrl: string;
  /** Where gateways hear of revocations; null when not known (they then notice within their cache TTL). */
  natsUrl: string | null;
  dbPrefix: string;
  source: string;
}

function findTarget(): Target | null {
  const dbPrefix = process.env.MONGO_DB_PREFIX ?? 'threadwork';
  const natsUrl = process.env.NATS_URL ?? null;
  if (process.env.MONGO_URL) return { mongoUrl: process.env.MONGO_URL, natsUrl, dbPrefix, source: 'MONGO_URL' };
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
    dbPrefix: stack.dbPrefix ?? dbPrefix,
    source: stackFile,
  };
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
      help: { type: 'boolean', short: 'h' },
    },
  });
  const [group, action, arg] = positionals;
  if (values.help || !group) {
    process.stdout.write(`${USAGE}\n`);
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
  const client = await connectMongo({
    url: target.mongoUrl,
    appName: 'threadwork-admin',
    serverSelectionTimeoutMs: 3_000,
  }).catch((err: Error) =>
    fail(
      `admin: cannot reach the database at ${target.mongoUrl} (from ${target.source}): ${err.message}. Is \`npm start\` running?`,
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
      await tellGateways(target.natsUrl);
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
async function tellGateways(natsUrl: string | null): Promise<void> {
  const late = 'gateways that remembered the key refuse it within AUTH_CACHE_TTL_MS (10 s by default)';
  if (!natsUrl) {
    process.stderr.write(`admin: NATS_URL is not set, so the revocation is not announced: ${late}\n`);
    return;
  }
  try {
    const nc = await connectNats({
      servers: natsUrl,
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
