import { MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, MongoServerSelectionError } from 'mongodb';
import { describe, expect, it } from 'vitest';
import { AppError, toAppError } from './errors.js';
import {
  databasesNamedBy,
  foreignDatabaseProblem,
  isMongoBusy,
  isMongoUnavailable,
  mongoCall,
  mongoUrlWithDatabase,
  redactMongoUrl,
} from './mongo.js';

/** A driver error the driver does not export, known only by its name (as the driver sets it). */
function namedError(name: string): Error {
  return new (class extends Error {
    override get name() {
      return name;
    }
  })('driver failure');
}

const serverError = (code: number) => new MongoServerError({ code, errmsg: `server error ${code}` });

describe('isMongoUnavailable', () => {
  it('says yes to failures to reach a server', () => {
    expect(isMongoUnavailable(new MongoNetworkError('connect ECONNREFUSED 127.0.0.1:27017'))).toBe(true);
    expect(isMongoUnavailable(new MongoNetworkTimeoutError('connection 3 timed out'))).toBe(true);
    // The reason (a topology description with the last error) only shapes the message.
    expect(isMongoUnavailable(new MongoServerSelectionError('Server selection timed out', {} as never))).toBe(true);
    // Pool errors are not exported; one of them is named unlike its parent class.
    expect(isMongoUnavailable(namedError('PoolClearedOnNetworkError'))).toBe(true);
    expect(isMongoUnavailable(namedError('MongoPoolClearedError'))).toBe(true);
    expect(isMongoUnavailable(namedError('MongoWaitQueueTimeoutError'))).toBe(true);
  });

  it('says yes to a node that cannot serve right now (election, shutdown)', () => {
    for (const code of [91, 189, 10107, 11600, 11602, 13435, 13436])
      expect(isMongoUnavailable(serverError(code))).toBe(true);
  });

  it('says no to answers about the request itself and to anything else', () => {
    expect(isMongoUnavailable(serverError(11000))).toBe(false); // duplicate key: someone else won
    expect(isMongoUnavailable(serverError(2))).toBe(false); // BadValue
    expect(isMongoUnavailable(new Error('boom'))).toBe(false);
    expect(isMongoUnavailable(new AppError('not_found', 'run not found'))).toBe(false);
    expect(isMongoUnavailable('ECONNREFUSED')).toBe(false);
  });
});

/** FerretDB on SQLite refusing a write that waited out its busy timeout, as it answers it. */
const sqliteBusy = () =>
  new MongoServerError({
    code: 1,
    codeName: 'InternalError',
    errmsg:
      '[msg_update.go:133 handler.(*Handler).updateDocument] [update.go:114 common.UpdateDocument] ' +
      '[collection.go:191 sqlite.(*collection).UpdateAll] database is locked (5) (SQLITE_BUSY)',
  });

describe('isMongoBusy', () => {
  it('says yes to a write refused because the database was busy: nothing was written', () => {
    expect(isMongoBusy(sqliteBusy())).toBe(true);
    expect(isMongoBusy(serverError(112))).toBe(true); // WriteConflict
  });

  it('says no to other server errors, even other internal ones', () => {
    expect(isMongoBusy(serverError(11000))).toBe(false);
    expect(isMongoBusy(serverError(1))).toBe(false);
    expect(isMongoBusy(new Error('database is locked'))).toBe(false);
  });

  it('is load, not a bug: an unwrapped one is reported unavailable, never internal', () => {
    expect(toAppError(sqliteBusy())).toMatchObject({ code: 'unavailable', retryable: true });
  });
});

describe('mongoCall', () => {
  it('tries a write refused as busy again, and answers with the try that went through', async () => {
    let tries = 0;
    const result = await mongoCall(async () => {
      if (++tries < 3) throw sqliteBusy();
      return 'written';
    });
    expect({ result, tries }).toEqual({ result: 'written', tries: 3 });
  });

  it('answers unavailable (retryable, the cause kept) when the database stays busy, after a few tries', async () => {
    let tries = 0;
    const cause = sqliteBusy();
    const err = await mongoCall(() => {
      tries++;
      return Promise.reject(cause);
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'unavailable', retryable: true, cause });
    expect(tries).toBe(4);
  });

  it('never tries anything else again: a duplicate key is the answer', async () => {
    let tries = 0;
    const duplicate = serverError(11000);
    await expect(
      mongoCall(() => {
        tries++;
        return Promise.reject(duplicate);
      }),
    ).rejects.toBe(duplicate);
    expect(tries).toBe(1);
  });

  it('passes results and other errors through', async () => {
    await expect(mongoCall(async () => 42)).resolves.toBe(42);
    const duplicate = serverError(11000);
    await expect(mongoCall(() => Promise.reject(duplicate))).rejects.toBe(duplicate);
  });

  it('turns an outage into unavailable, keeping the cause', async () => {
    const cause = new MongoNetworkError('connection closed');
    const err = await mongoCall(() => Promise.reject(cause)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('unavailable');
    expect((err as AppError).retryable).toBe(true);
    expect((err as AppError).cause).toBe(cause);
  });

  it('stops waiting at its deadline: unavailable, and a late failure goes nowhere', async () => {
    let fail: (err: Error) => void = () => {};
    const hanging = new Promise<never>((_resolve, reject) => {
      fail = reject;
    });
    // `hanging` never settles on its own: without the deadline this test would hang until its timeout.
    const err = await mongoCall(() => hanging, { timeoutMs: 50 }).catch((e: unknown) => e);
    expect((err as AppError).code).toBe('unavailable');
    expect((err as AppError).message).toMatch(/within 50 ms/);
    // The operation failing after the deadline must not surface as an unhandled rejection.
    fail(new MongoNetworkTimeoutError('connection timed out'));
    await new Promise((resolve) => setTimeout(resolve, 10));
  });

  it('answers in time when the call does', async () => {
    await expect(mongoCall(async () => 'ok', { timeoutMs: 1_000 })).resolves.toBe('ok');
  });
});

describe('a service’s connection string', () => {
  const own = 'threadwork_gateway';

  it('may name no database, its own, or authenticate in its own or in admin', () => {
    expect(foreignDatabaseProblem('mongodb://127.0.0.1:27017/', own)).toBeNull();
    expect(foreignDatabaseProblem('mongodb://127.0.0.1:27017', own)).toBeNull();
    expect(foreignDatabaseProblem('mongodb://gw:pw@a:27017,b:27017/threadwork_gateway?replicaSet=rs0', own)).toBeNull();
    expect(foreignDatabaseProblem('mongodb://gw:pw@a:27017,b:27017/?replicaSet=rs0&authSource=admin', own)).toBeNull();
    expect(
      foreignDatabaseProblem('mongodb+srv://gw:pw@cluster.example.net/threadwork_gateway?authSource=admin', own),
    ).toBeNull();
  });

  it('is refused when it names another service’s database, in its path or as where its user lives', () => {
    expect(foreignDatabaseProblem('mongodb://th:pw@a:27017,b:27017/threadwork_threads?replicaSet=rs0', own)).toMatch(
      /names database "threadwork_threads", but this service's is "threadwork_gateway"/,
    );
    expect(foreignDatabaseProblem('mongodb://th:pw@a:27017/?authSource=threadwork_threads', own)).toMatch(
      /authenticates against database "threadwork_threads"/,
    );
    // Another install's prefix is another database too.
    expect(foreignDatabaseProblem('mongodb://a:27017/staging_gateway', own)).not.toBeNull();
  });

  it('reads the databases of replica-set and SRV strings', () => {
    expect(databasesNamedBy('mongodb://u:p%40ss@h1:1,h2:2/my%5Fdb?authSource=admin&replicaSet=rs0')).toEqual({
      path: 'my_db',
      authSource: 'admin',
    });
    expect(databasesNamedBy('mongodb+srv://c.example.net/?tls=true')).toEqual({ path: null, authSource: null });
  });

  it('can be made to name a service’s own database', () => {
    expect(mongoUrlWithDatabase('mongodb://127.0.0.1:27017/', own)).toBe(
      'mongodb://127.0.0.1:27017/threadwork_gateway',
    );
    expect(mongoUrlWithDatabase('mongodb://a:1,b:2/?replicaSet=rs0', own)).toBe(
      'mongodb://a:1,b:2/threadwork_gateway?replicaSet=rs0',
    );
    expect(mongoUrlWithDatabase('mongodb://h:1/other?tls=true', own)).toBe('mongodb://h:1/threadwork_gateway?tls=true');
    expect(foreignDatabaseProblem(mongoUrlWithDatabase('mongodb://h:1', own), own)).toBeNull();
  });

  it('is shown without its password', () => {
    expect(redactMongoUrl('mongodb://threadwork-gateway:s3cr%40t@h1:1,h2:2/threadwork_gateway')).toBe(
      'mongodb://threadwork-gateway:[redacted]@h1:1,h2:2/threadwork_gateway',
    );
    expect(redactMongoUrl('mongodb://h1:1/')).toBe('mongodb://h1:1/');
  });
});
