import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';
import { newId } from '../domain/ids.js';
import { generateKey, isWellFormedKey, keyMatches, keyPrefix } from '../domain/keys.js';
import { loginLinkCollection } from './login-links.js';

export interface UserDoc {
  _id: string;
  login: string;
  created_at: Date;
  /**
   * Session cookies count only while they carry this number; signing out raises it, ending every
   * session of the user. Absent on users made before it existed: read as 0 (sessionEpochOf).
   */
  session_epoch?: number;
}

/** The user's current session epoch. */
export function sessionEpochOf(user: UserDoc): number {
  return user.session_epoch ?? 0;
}

export interface ApiKeyDoc {
  _id: string;
  user_id: string;
  prefix: string;
  hash: string;
  created_at: Date;
  revoked_at: Date | null;
}

export interface IdentityStore {
  ensureIndexes(): Promise<void>;
  /** Finds the user by login, creating it if needed; concurrent calls converge on one user. */
  ensureUser(login: string): Promise<UserDoc>;
  listUsers(): Promise<UserDoc[]>;
  /** The user with this id, or null: a signed session names its user by id. */
  findUser(id: string): Promise<UserDoc | null>;
  createKey(userId: string): Promise<{ id: string; key: string; prefix: string }>;
  /** Revokes by key id or prefix; returns how many keys it revoked. */
  revokeKey(idOrPrefix: string): Promise<number>;
  listKeys(userId?: string): Promise<ApiKeyDoc[]>;
  /** The user a presented key belongs to, or null when it is malformed, unknown or revoked. */
  authenticate(key: string): Promise<UserDoc | null>;
  /** Ends every session of the user (raises its session epoch); returns the new epoch. API keys are untouched. */
  endSessions(userId: string): Promise<number>;
  /** A one-time login link's token for the user, valid for `ttlMs` (login-links.ts). */
  createLoginLink(userId: string, ttlMs: number): Promise<string>;
  /** The user of an unused, unexpired login link, spending it; null for any other token. */
  redeemLoginLink(token: string): Promise<UserDoc | null>;
  /**
   * The user of a key this store can answer for without the database (a key accepted moments ago:
   * auth-cache.ts), else null. A store that remembers nothing leaves it out.
   */
  remembered?(key: string): UserDoc | null;
  /** Whether the database answers within `timeoutMs` (readiness); `unavailable` when it does not. */
  ping(timeoutMs: number): Promise<void>;
}

export interface IdentityStoreOptions {
  /** How long a call may wait for the database before it is `unavailable` (a request's budget). */
  timeoutMs?: number;
}

/** Users and API keys. Every call turns a database outage into `unavailable` (mongoCall). */
export function createIdentityStore(db: Db, { timeoutMs }: IdentityStoreOptions = {}): IdentityStore {
  const store = identityCollections(db);
  const call = <T>(fn: () => Promise<T>) => mongoCall(fn, { timeoutMs });
  return {
    ensureIndexes: () => call(() => store.ensureIndexes()),
    ensureUser: (login) => call(() => store.ensureUser(login)),
    listUsers: () => call(() => store.listUsers()),
    findUser: (id) => call(() => store.findUser(id)),
    createKey: (userId) => call(() => store.createKey(userId)),
    revokeKey: (idOrPrefix) => call(() => store.revokeKey(idOrPrefix)),
    listKeys: (userId) => call(() => store.listKeys(userId)),
    authenticate: (key) => call(() => store.authenticate(key)),
    endSessions: (userId) => call(() => store.endSessions(userId)),
    createLoginLink: (userId, ttlMs) => call(() => store.createLoginLink(userId, ttlMs)),
    redeemLoginLink: (token) => call(() => store.redeemLoginLink(token)),
    ping: (pingTimeoutMs) =>
      mongoCall(() => db.command({ ping: 1 }).then(() => undefined), { timeoutMs: pingTimeoutMs }),
  };
}

function identityCollections(db: Db): Omit<IdentityStore, 'remembered' | 'ping'> {
  const users: Collection<UserDoc> = db.collection<UserDoc>('users');
  const keys: Collection<ApiKeyDoc> = db.collection<ApiKeyDoc>('api_keys');
  const links = loginLinkCollection(db);

  return {
    async ensureIndexes() {
      await ensureIndexes(users, [
        {
          key: { login: 1 },
          options: { name: 'login_unique', unique: true },
          serves: 'find a user by login; one user per login',
        },
      ]);
      await ensureIndexes(keys, [
        {
          key: { prefix: 1 },
          options: { name: 'prefix' },
          serves: 'authenticate: find candidate keys by their clear prefix',
        },
        { key: { user_id: 1, created_at: 1 }, options: { name: 'user_created' }, serves: "list a user's keys" },
      ]);
      await links.ensureIndexes();
    },

    async ensureUser(login) {
      const existing = await users.findOne({ login });
      if (existing) return existing;
      const user: UserDoc = { _id: newId('usr'), login, created_at: new Date() };
      try {
        await users.insertOne(user);
        return user;
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
        const winner = await users.findOne({ login });
        if (!winner) throw err;
        return winner;
      }
    },

    listUsers: () => users.find({}).sort({ login: 1 }).toArray(),

    findUser: (id) => users.findOne({ _id: id }),

    async createKey(userId) {
      const { key, prefix, hash } = generateKey();
      const id = newId('key');
      await keys.insertOne({ _id: id, user_id: userId, prefix, hash, created_at: new Date(), revoked_at: null });
      return { id, key, prefix };
    },

    async revokeKey(idOrPrefix) {
      const result = await keys.updateMany(
        { $or: [{ _id: idOrPrefix }, { prefix: idOrPrefix }], revoked_at: null },
        { $set: { revoked_at: new Date() } },
      );
      return result.modifiedCount;
    },

    listKeys: (userId) =>
      keys
        .find(userId ? { user_id: userId } : {})
        .sort({ created_at: 1 })
        .toArray(),

    async authenticate(key) {
      if (!isWellFormedKey(key)) return null;
      const candidates = await keys.find({ prefix: keyPrefix(key), revoked_at: null }).toArray();
      const match = candidates.find((candidate) => keyMatches(key, candidate.hash));
      if (!match) return null;
      return users.findOne({ _id: match.user_id });
    },

    async endSessions(userId) {
      const user = await users.findOneAndUpdate(
        { _id: userId },
        { $inc: { session_epoch: 1 } },
        { returnDocument: 'after' },
      );
      if (!user) throw new Error(`no user ${userId}`);
      return sessionEpochOf(user);
    },

    createLoginLink: (userId, ttlMs) => links.create(userId, ttlMs),

    async redeemLoginLink(token) {
      const userId = await links.redeem(token);
      return userId === null ? null : users.findOne({ _id: userId });
    },
  };
}
