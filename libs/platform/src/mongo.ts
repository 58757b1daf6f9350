import {
  MongoClient,
  MongoServerError,
  type Collection,
  type CreateIndexesOptions,
  type Document,
  type IndexSpecification,
} from 'mongodb';
import { SpanKind, SpanStatusCode, type Span } from '@opentelemetry/api';
import { DEFAULT_MONGO_SERVER_SELECTION_TIMEOUT_MS } from './config.js';
import { unavailable } from './errors.js';
import type { Logger } from './logger.js';
import { retry } from './retry.js';
import { isMongoBusy, isMongoUnavailable } from './transient.js';

export { isMongoBusy, isMongoUnavailable } from './transient.js';
import { telemetryEnabled, tracer } from './telemetry.js';

export type { Collection, Db, Document } from 'mongodb';

export interface MongoOptions {
  url: string;
  appName: string;
  /** How long an operation waits for a server (and a new connection to it) before failing: a 503. */
  serverSelectionTimeoutMs?: number;
  /** Where to say that the database became unreachable, and that it is back (see watchReachability). */
  logger?: Logger;
}

/** Connects and verifies the server answers, so a bad URL fails at start, not at first request. */
export async function connectMongo({
  url,
  appName,
  serverSelectionTimeoutMs = DEFAULT_MONGO_SERVER_SELECTION_TIMEOUT_MS,
  logger,
}: MongoOptions): Promise<MongoClient> {
  const tracing = telemetryEnabled();
  const client = new MongoClient(url, {
    appName,
    serverSelectionTimeoutMS: serverSelectionTimeoutMs,
    connectTimeoutMS: serverSelectionTimeoutMs,
    // Retries are ours to decide (idempotency keys); a silent driver retry of a write can race them.
    retryWrites: false,
    monitorCommands: tracing,
  });
  if (tracing) traceCommands(client);
  await client.connect();
  await client.db('admin').command({ ping: 1 });
  if (logger) watchReachability(client, logger);
  return client;
}

/**
 * Logs each server going unreachable, with the driver's reason, and coming back: one line per
 * change. The calls it refuses meanwhile are answered 503 `unavailable` and not logged one by
 * one, so these lines are how an operator sees an outage and how long it lasted. Called once
 * connected: every server starts reachable.
 */
function watchReachability(client: MongoClient, logger: Logger): void {
  const reachable = new Map<string, boolean>();
  client.on('serverDescriptionChanged', ({ address, newDescription }) => {
    const now = newDescription.type !== 'Unknown';
    if ((reachable.get(address) ?? true) === now) return;
    reachable.set(address, now);
    if (now) logger.info({ address }, 'database reachable again');
    else logger.warn({ address, reason: newDescription.error?.message }, 'database unreachable');
  });
}

/**
 * A CLIENT span per database command, from the driver's command monitoring: it needs no module
 * patching (which ESM makes fragile), and the events fire in the caller's async context, so each
 * span joins the trace of the request that issued the command.
 */
function traceCommands(client: MongoClient): void {
  const open = new Map<number, Span>();
  client.on('commandStarted', (event) => {
    const span = tracer().startSpan(`mongodb ${event.commandName}`, {
      kind: SpanKind.CLIENT,
      attributes: {
        'db.system': 'mongodb',
        'db.namespace': event.databaseName,
        'db.operation.name': event.commandName,
      },
    });
    open.set(event.requestId, span);
  });
  const finish = (requestId: number, failed: boolean) => {
    const span = open.get(requestId);
    if (!span) return;
    open.delete(requestId);
    if (failed) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  };
  client.on('commandSucceeded', (event) => finish(event.requestId, false));
  client.on('commandFailed', (event) => finish(event.requestId, true));
}

/** Name of a service's database: one per service keeps "a service reads only its own" honest. */
export function serviceDbName(prefix: string, service: string): string {
  return `${prefix}_${service}`;
}

/** The databases a connection string names: its path (the default database) and its `authSource`. */
export function databasesNamedBy(url: string): { path: string | null; authSource: string | null } {
  // Not WHATWG URL: a replica set's host list (`h1:27017,h2:27017`) is no URL host.
  const match = /^mongodb(?:\+srv)?:\/\/[^/?]*(?:\/([^?]*))?(?:\?(.*))?$/.exec(url.trim());
  if (!match) return { path: null, authSource: null };
  const decode = (value: string) => {
    try {
      return decodeURIComponent(value);
    } catch {
      return value;
    }
  };
  const path = match[1] ? decode(match[1]) : null;
  const authSource = new URLSearchParams(match[2] ?? '').get('authSource');
  return { path: path || null, authSource: authSource || null };
}

/**
 * Why a service must not use this connection string, or null when it may. Each service connects as
 * a MongoDB user of its own whose only role is `readWrite` on its own database (README "Security
 * model"), so a string that names another database — in its path, or as the `authSource` its user
 * lives in (`admin` is where users may live too) — belongs to another service: a swapped secret,
 * said at start rather than as "not authorized" at the first write, or as writes in the wrong place
 * where the server does not check.
 */
export function foreignDatabaseProblem(url: string, ownDb: string): string | null {
  const { path, authSource } = databasesNamedBy(url);
  if (path !== null && path !== ownDb) {
    return `names database ${JSON.stringify(path)}, but this service's is ${JSON.stringify(ownDb)}`;
  }
  if (authSource !== null && authSource !== ownDb && authSource !== 'admin') {
    return `authenticates against database ${JSON.stringify(authSource)}, neither this service's (${JSON.stringify(ownDb)}) nor admin`;
  }
  return null;
}

/** The connection string with `db` as the database it names (its path), the rest as it was. */
export function mongoUrlWithDatabase(url: string, db: string): string {
  const match = /^(mongodb(?:\+srv)?:\/\/[^/?]*)(?:\/[^?]*)?(\?.*)?$/.exec(url.trim());
  if (!match) throw new Error('not a MongoDB connection string');
  return `${match[1]}/${encodeURIComponent(db)}${match[2] ?? ''}`;
}

/** A connection string as it may be shown: without the password. */
export function redactMongoUrl(url: string): string {
  return url.replace(/^(mongodb(?:\+srv)?:\/\/[^:@/]*):[^@/]*@/, '$1:[redacted]@');
}

export interface IndexDefinition {
  key: IndexSpecification;
  options: CreateIndexesOptions & { name: string };
  /** The query this index serves (every index states it). */
  serves: string;
}

/**
 * Creates indexes that do not exist yet. Idempotent: creating an index that already exists with
 * the same definition is a no-op on MongoDB and FerretDB alike; a changed definition under the same
 * name is an error worth stopping for. One index per command: FerretDB 1.24 panics (and drops the
 * connection) on a multi-index createIndexes when some of them already exist.
 */
export async function ensureIndexes<T extends Document>(
  collection: Collection<T>,
  indexes: IndexDefinition[],
): Promise<void> {
  for (const { key, options } of indexes) {
    await collection.createIndexes([{ key: key as Document, ...options }]);
  }
}

/** Did this write lose a unique-index race (E11000)? That is how "exactly one wins" is decided. */
export function isDuplicateKeyError(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}

export interface MongoCallOptions {
  /**
   * Stop waiting after this long and fail `unavailable`. The driver's own timeouts do not bound a
   * call: on a connection to a server that stopped answering (a partition, a frozen process) an
   * operation waits until the server monitor gives up, and reads are retried after that. The
   * operation itself is not cancelled and may still complete later; callers key their writes.
   */
  timeoutMs?: number;
}

/**
 * How often a write the database refused as busy (isMongoBusy: nothing was written) is tried again
 * before the caller hears `unavailable`. Each try may wait out the database's own busy timeout
 * before it is refused (seconds on FerretDB over SQLite), so a few are plenty: a database locked for
 * longer is overloaded, which the caller's retry of a 503 is for.
 */
const BUSY_RETRIES = 3;
const BUSY_BACKOFF = { minDelayMs: 50, maxDelayMs: 500, jitter: true } as const;

/** Why a call's busy retries stop: its caller stopped waiting (the deadline passed). */
const ABANDONED = unavailable('the caller stopped waiting for the database');

/**
 * Runs a database call, turning an outage into `unavailable` (503, retryable) instead of
 * `internal`. A write refused because the database was busy is tried again first (it wrote
 * nothing, and our writes are keyed or conditional, so trying again decides the same way), then
 * is `unavailable` too: contention is load, never a bug to report as `internal`.
 */
export async function mongoCall<T>(fn: () => Promise<T>, { timeoutMs }: MongoCallOptions = {}): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  // Past the deadline the caller has its answer: no retry of a busy write is started after it.
  const abandoned = new AbortController();
  let settled = false;
  const call = () =>
    retry(() => fn(), {
      ...BUSY_BACKOFF,
      retries: BUSY_RETRIES,
      shouldRetry: isMongoBusy,
      signal: abandoned.signal,
    }).finally(() => {
      settled = true;
    });
  try {
    if (timeoutMs === undefined) return await call();
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(unavailable(`database did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    // race() handles a rejection that comes after the deadline, so a late failure is not unhandled.
    return await Promise.race([call(), deadline]);
  } catch (err) {
    if (isMongoUnavailable(err)) throw unavailable('database unavailable', err);
    if (isMongoBusy(err)) throw unavailable('database busy', err);
    throw err;
  } finally {
    clearTimeout(timer);
    // Only a call still under way has retries to stop; an abort without a reason makes a
    // DOMException (a stack captured) on every call, the runs service's costliest line per read.
    if (!settled) abandoned.abort(ABANDONED);
  }
}

export type { MongoClient };
