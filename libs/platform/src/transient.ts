import { MongoNetworkError, MongoServerError, MongoServerSelectionError } from 'mongodb';

// Which failures mean "a backing server is not answering right now" — a 503 `unavailable` worth
// retrying — rather than a bug. Decided once here, for every service: an outage or overload must
// never reach a caller as `internal`.

/** Driver errors that mean "no server to talk to right now", by name: not every class is exported. */
const UNAVAILABLE_ERRORS = new Set([
  'MongoServerSelectionError',
  'MongoNetworkError',
  'MongoNetworkTimeoutError',
  'MongoTopologyClosedError',
  'MongoNotConnectedError',
  'MongoClientClosedError',
  'MongoServerClosedError',
  'MongoPoolClearedError',
  // The pool was cleared because the server's monitor timed out (a server that stopped answering).
  'PoolClearedOnNetworkError',
  'MongoWaitQueueTimeoutError',
  'MongoOperationTimeoutError',
]);

/**
 * Server answers that mean the node cannot serve the command right now (a replica set electing a
 * primary, a node shutting down or unreachable from the one asked): the retryable-writes codes.
 * Retrying is safe for us whatever the server did: every write is keyed.
 */
const UNAVAILABLE_SERVER_CODES = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  89, // NetworkTimeout
  91, // ShutdownInProgress
  189, // PrimarySteppedDown
  262, // ExceededTimeLimit
  9001, // SocketException
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
]);

/**
 * Socket failures the driver sometimes passes through unwrapped: a pooled connection written to
 * after the server closed it ("This socket has been ended by the other party", EPIPE), or reset.
 */
const SOCKET_ERROR_CODES = new Set(['EPIPE', 'ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'ENOTCONN', 'ETIMEDOUT']);

/** Does this driver failure mean the database is unreachable for now (a 503 worth retrying)? */
export function isMongoUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as NodeJS.ErrnoException).code;
  if (typeof code === 'string' && SOCKET_ERROR_CODES.has(code)) return true;
  if (err instanceof MongoNetworkError || err instanceof MongoServerSelectionError) return true;
  if (UNAVAILABLE_ERRORS.has(err.name)) return true;
  return err instanceof MongoServerError && typeof err.code === 'number' && UNAVAILABLE_SERVER_CODES.has(err.code);
}

/**
 * A write the database refused because it was too busy to take it, having written nothing.
 * FerretDB on SQLite answers `database is locked (5) (SQLITE_BUSY)` (an InternalError, code 1)
 * when a write waited out its busy timeout for the database's one write lock: many writers at once
 * on a loaded machine (a run's end racing the admission of the thread's next run and everything
 * else the service writes) can keep a write waiting that long. The write's SQLite transaction was
 * rolled back, so trying it again is safe. MongoDB's WriteConflict (112) is the same refusal of a
 * write that met a concurrent one.
 */
export function isMongoBusy(err: unknown): boolean {
  if (!(err instanceof MongoServerError)) return false;
  return err.code === 112 || /\bSQLITE_BUSY\b|database is locked/.test(err.message);
}

/**
 * NATS client failures that mean the server or the peer service did not answer in time: a request
 * that timed out or found no responder, a connection that is closed, draining or reconnecting, and
 * JetStream saying it is not there (a stream leader being elected answers with no responders).
 */
const UNAVAILABLE_NATS_ERRORS = new Set([
  'TimeoutError',
  'NoResponders',
  'RequestError',
  'ClosedConnectionError',
  'DrainingConnectionError',
  'ConnectionError',
  'JetStreamNotEnabled',
]);

/** Does this failure mean a backing server is unreachable or overloaded for now? Looks through `cause`s. */
export function isTransientFailure(err: unknown, depth = 0): boolean {
  if (!(err instanceof Error) || depth > 4) return false;
  if (isMongoUnavailable(err) || isMongoBusy(err) || UNAVAILABLE_NATS_ERRORS.has(err.name)) return true;
  return isTransientFailure(err.cause, depth + 1);
}
