import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { CreateApiKeyBody, NATS_IDENTITIES, natsPermissions } from '@threadwork/contracts';
import { connectMongo, foreignDatabaseProblem, redactMongoUrl, serviceDbName } from '@threadwork/platform';
import { SESSION_COOKIE, signSession } from '../domain/session.js';
import { createIdentityStore, DEFAULT_KEY_NAME, sessionEpochOf } from '../store/identity.js';
import { loginLinkOptions } from './login-link.js';
import { tellGateways } from './announce.js';
import { fail } from './fail.js';
import { writeNatsKeys } from './nats-keys.js';
import { findTarget } from './target.js';

const USAGE = `usage: npm run admin -- <command>
  keys create --user <login> [--name <name>]
                               create the user if needed and print a new API key (last line);
                               the name (default cli, at most 100 characters) is what settings list
  keys revoke <key id|prefix>  revoke a key
  keys list [--user <login>]   list keys (ids and prefixes, never the keys)
  users list                   list users
  sessions create --user <login> [--ttl-hours 24]
                               print a signed browser session cookie for the user (last line)
  login-link --user <login> [--minutes 15] [--origin http://localhost:8080]
                               create the user if needed and print a one-time login link (last line)
                               that signs a browser in at <origin> (the gateway as the browser reaches it)
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

/** Runs one command of the admin CLI (USAGE) with `args`, the command line after the script. */
export async function runAdmin(args: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      user: { type: 'string' },
      name: { type: 'string' },
      'ttl-hours': { type: 'string' },
      minutes: { type: 'string' },
      origin: { type: 'string' },
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

  // Checked before touching the database, like the session secret.
  const link = group === 'login-link' ? loginLinkOptions(values) : null;

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
      const name = (values.name ?? DEFAULT_KEY_NAME).trim();
      if (!CreateApiKeyBody.safeParse({ name }).success) fail('admin: --name must be 1 to 100 characters');
      const user = await identity.ensureUser(values.user);
      // No cap: the operator decides; the keys still count against the user's own in settings.
      const { key, doc } = await identity.createKey(user._id, { name });
      out(
        `created key ${doc._id} "${name}" (prefix ${doc.prefix}) for ${user.login} (${user._id}); it is shown only once:`,
      );
      out(key);
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
          `${key._id}\t${key.name ?? DEFAULT_KEY_NAME}\t${key.prefix}…\t${logins.get(key.user_id) ?? key.user_id}\t${key.created_at.toISOString()}\t${key.revoked_at ? `revoked ${key.revoked_at.toISOString()}` : 'active'}`,
        );
      }
    } else if (group === 'sessions' && action === 'create') {
      if (!values.user) fail('admin: sessions create needs --user <login>');
      const user = await identity.ensureUser(values.user);
      const expiresAt = Math.floor(Date.now() / 1000 + ttlHours * 3600);
      const value = signSession(user._id, expiresAt, sessionSecret, sessionEpochOf(user));
      out(
        `session for ${user.login} (${user._id}) until ${new Date(expiresAt * 1000).toISOString()}; send it as this header:`,
      );
      out(`Cookie: ${SESSION_COOKIE}=${value}`);
    } else if (link) {
      const user = await identity.ensureUser(link.login);
      const token = await identity.createLoginLink(user._id, link.minutes * 60_000);
      out(`login link for ${user.login} (${user._id}), valid once for ${link.minutes} min:`);
      out(link.url(token));
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
