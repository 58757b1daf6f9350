import {
  AppError,
  ensureIndexes,
  isDuplicateKeyError,
  mongoCall,
  type Collection,
  type Db,
  type Logger,
} from '@threadwork/platform';
import { newId } from '../domain/ids.js';
import { githubLogin } from '../domain/github-sign-in.js';
import { generateKey, isWellFormedKey, keyMatches, keyPrefix } from '../domain/keys.js';
import { gitHubStateCollection, type GitHubUserDoc } from './github-sign-in.js';
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
  /** What the user called it; keys older than names have none (read as `cli`). */
  name?: string;
  prefix: string;
  hash: string;
  created_at: Date;
  /** When it last authenticated, written at most once a minute (LAST_USED_RESOLUTION_MS). */
  last_used_at?: Date | null;
  revoked_at: Date | null;
  /**
   * The place an active key holds among its user's capped keys (0 … cap-1), unique per user, so
   * two creations racing for the last place cannot both win; a key outside the cap (the admin
   * CLI's) or revoked holds its own id instead.
   */
  slot?: number | string;
}

export interface NewKeyOptions {
  /** Default DEFAULT_KEY_NAME. */
  name?: string;
  /** Active keys the user may hold, this one included; past it `too_many_api_keys`. None: no cap. */
  maxActive?: number;
}

/** A key just made: `key` is shown once and never stored. */
export interface NewApiKey {
  id: string;
  key: string;
  prefix: string;
  doc: ApiKeyDoc;
}

/** Keys made before keys had names: the admin CLI's. */
export const DEFAULT_KEY_NAME = 'cli';
/** How stale `last_used_at` may get: a busy key is written about once a minute, not per request. */
export const LAST_USED_RESOLUTION_MS = 60_000;
/** Creations that lost the race for a place to retry before giving up (a third racer is rare). */
const SLOT_ATTEMPTS = 5;

export interface IdentityStore {
  ensureIndexes(): Promise<void>;
  /** Finds the user by login, creating it if needed; concurrent calls converge on one user. */
  ensureUser(login: string): Promise<UserDoc>;
  listUsers(): Promise<UserDoc[]>;
  /** The user with this id, or null: a signed session names its user by id. */
  findUser(id: string): Promise<UserDoc | null>;
  createKey(userId: string, options?: NewKeyOptions): Promise<NewApiKey>;
  /** Revokes by key id or prefix; returns how many keys it revoked. */
  revokeKey(idOrPrefix: string): Promise<number>;
  /**
   * Revokes the user's own key `id`: the key (as it now is) if it is the user's, revoked now or
   * before; null if it is no key of theirs.
   */
  revokeOwnKey(userId: string, id: string): Promise<ApiKeyDoc | null>;
  listKeys(userId?: string): Promise<ApiKeyDoc[]>;
  /** The user a presented key belongs to, or null when it is malformed, unknown or revoked. */
  authenticate(key: string): Promise<UserDoc | null>;
  /** Ends every session of the user (raises its session epoch); returns the new epoch. API keys are untouched. */
  endSessions(userId: string): Promise<number>;
  /** A one-time login link's token for the user, valid for `ttlMs` (login-links.ts). */
  createLoginLink(userId: string, ttlMs: number): Promise<string>;
  /** The user of an unused, unexpired login link, spending it; null for any other token. */
  redeemLoginLink(token: string): Promise<UserDoc | null>;
  /** A new sign-in-with-GitHub state (github-sign-in.ts), stored as its hash. */
  createGitHubState(): Promise<string>;
  /** Whether the state is known and unexpired, spending it; false for any other. */
  consumeGitHubState(state: string): Promise<boolean>;
  /**
   * The user a GitHub user signs in as, by GitHub's numeric id: made on their first sign-in (login
   * `github:<login>`), its login brought up to date on each later one. Concurrent first sign-ins
   * converge on one user.
   */
  signInWithGitHub(github: { id: number; login: string }): Promise<UserDoc>;
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
  /** Where a failed `last_used_at` write is reported: it is not the request's concern. */
  logger?: Logger;
}

/** Users and API keys. Every call turns a database outage into `unavailable` (mongoCall). */
export function createIdentityStore(db: Db, { timeoutMs, logger }: IdentityStoreOptions = {}): IdentityStore {
  const store = identityCollections(db, logger);
  const call = <T>(fn: () => Promise<T>) => mongoCall(fn, { timeoutMs });
  return {
    ensureIndexes: () => call(() => store.ensureIndexes()),
    ensureUser: (login) => call(() => store.ensureUser(login)),
    listUsers: () => call(() => store.listUsers()),
    findUser: (id) => call(() => store.findUser(id)),
    createKey: (userId, options) => call(() => store.createKey(userId, options)),
    revokeKey: (idOrPrefix) => call(() => store.revokeKey(idOrPrefix)),
    revokeOwnKey: (userId, id) => call(() => store.revokeOwnKey(userId, id)),
    listKeys: (userId) => call(() => store.listKeys(userId)),
    authenticate: (key) => call(() => store.authenticate(key)),
    endSessions: (userId) => call(() => store.endSessions(userId)),
    createLoginLink: (userId, ttlMs) => call(() => store.createLoginLink(userId, ttlMs)),
    redeemLoginLink: (token) => call(() => store.redeemLoginLink(token)),
    createGitHubState: () => call(() => store.createGitHubState()),
    consumeGitHubState: (state) => call(() => store.consumeGitHubState(state)),
    signInWithGitHub: (github) => call(() => store.signInWithGitHub(github)),
    ping: (pingTimeoutMs) =>
      mongoCall(() => db.command({ ping: 1 }).then(() => undefined), { timeoutMs: pingTimeoutMs }),
  };
}

function identityCollections(db: Db, logger: Logger | undefined): Omit<IdentityStore, 'remembered' | 'ping'> {
  const users: Collection<UserDoc> = db.collection<UserDoc>('users');
  const keys: Collection<ApiKeyDoc> = db.collection<ApiKeyDoc>('api_keys');
  const links = loginLinkCollection(db);
  const githubStates = gitHubStateCollection(db);
  const githubUsers: Collection<GitHubUserDoc> = db.collection<GitHubUserDoc>('github_users');

  /** A new user for a GitHub user: `github:<login>`, or with the id when that login is taken. */
  async function insertGitHubUser(github: { id: number; login: string }): Promise<UserDoc> {
    for (const taken of [false, true]) {
      const user: UserDoc = { _id: newId('usr'), login: githubLogin(github, taken), created_at: new Date() };
      try {
        await users.insertOne(user);
        return user;
      } catch (err) {
        if (!isDuplicateKeyError(err) || taken) throw err;
      }
    }
    throw new Error('unreachable');
  }

  /** The user's login brought up to the GitHub user's current one (or its form with the id, when taken). */
  async function followGitHubLogin(user: UserDoc, github: { id: number; login: string }): Promise<UserDoc> {
    for (const taken of [false, true]) {
      const login = githubLogin(github, taken);
      if (user.login === login) return user;
      try {
        await users.updateOne({ _id: user._id }, { $set: { login } });
        return { ...user, login };
      } catch (err) {
        if (!isDuplicateKeyError(err) || taken) throw err;
      }
    }
    return user;
  }

  /** Marks the key used, unless it was marked within the resolution: fire and forget. */
  function noteUse(key: ApiKeyDoc): void {
    const now = new Date();
    const stale = new Date(now.getTime() - LAST_USED_RESOLUTION_MS);
    if (key.last_used_at && key.last_used_at > stale) return;
    // Guarded by the old value too, so replicas that looked the key up together write it once.
    keys
      .updateOne(
        { _id: key._id, $or: [{ last_used_at: null }, { last_used_at: { $lte: stale } }] },
        { $set: { last_used_at: now } },
      )
      .catch((err: unknown) => logger?.warn({ err, key_id: key._id }, 'could not record when an API key was used'));
  }

  /** The lowest place under `maxActive` no active key holds, or null when the user is at the cap. */
  async function freeSlot(userId: string, maxActive: number): Promise<number | null> {
    const active = await keys.find({ user_id: userId, revoked_at: null }).toArray();
    if (active.length >= maxActive) return null;
    const taken = new Set(active.map((key) => key.slot));
    for (let slot = 0; slot < maxActive; slot++) if (!taken.has(slot)) return slot;
    return null;
  }

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
      // Keys made before places existed take their own id, so the unique index below can be built.
      for (const key of await keys.find({ slot: { $exists: false } }).toArray()) {
        await keys.updateOne({ _id: key._id, slot: { $exists: false } }, { $set: { slot: key._id } });
      }
      await ensureIndexes(keys, [
        {
          key: { user_id: 1, slot: 1 },
          options: { name: 'user_slot_unique', unique: true },
          serves: 'the cap on active keys: one key per place, so racing creations cannot pass it',
        },
      ]);
      await links.ensureIndexes();
      await githubStates.ensureIndexes();
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

    async createKey(userId, { name = DEFAULT_KEY_NAME, maxActive } = {}) {
      for (let attempt = 0; attempt < SLOT_ATTEMPTS; attempt++) {
        const { key, prefix, hash } = generateKey();
        const id = newId('key');
        const slot = maxActive === undefined ? id : await freeSlot(userId, maxActive);
        if (slot === null) {
          throw new AppError(
            'too_many_api_keys',
            `at most ${maxActive} API keys may be active at once; revoke one you no longer use first`,
          );
        }
        const doc: ApiKeyDoc = {
          _id: id,
          user_id: userId,
          name,
          prefix,
          hash,
          created_at: new Date(),
          last_used_at: null,
          revoked_at: null,
          slot,
        };
        try {
          await keys.insertOne(doc);
          return { id, key, prefix, doc };
        } catch (err) {
          // Another creation took this place first: look again at what is left.
          if (!isDuplicateKeyError(err)) throw err;
        }
      }
      throw new AppError('unavailable', 'too many API keys are being created at once; retry', { retryable: true });
    },

    async revokeKey(idOrPrefix) {
      const active = await keys
        .find({ $or: [{ _id: idOrPrefix }, { prefix: idOrPrefix }], revoked_at: null })
        .toArray();
      const at = new Date();
      let revoked = 0;
      // One by one: each gives its place back by taking its own id.
      for (const key of active) {
        const result = await keys.updateOne(
          { _id: key._id, revoked_at: null },
          { $set: { revoked_at: at, slot: key._id } },
        );
        revoked += result.modifiedCount;
      }
      return revoked;
    },

    async revokeOwnKey(userId, id) {
      await keys.updateOne(
        { _id: id, user_id: userId, revoked_at: null },
        { $set: { revoked_at: new Date(), slot: id } },
      );
      return keys.findOne({ _id: id, user_id: userId });
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
      const user = await users.findOne({ _id: match.user_id });
      if (user) noteUse(match);
      return user;
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

    createGitHubState: () => githubStates.create(),
    consumeGitHubState: (state) => githubStates.consume(state),

    async signInWithGitHub(github) {
      const now = new Date();
      const linked = await githubUsers.findOne({ _id: github.id });
      if (linked) {
        const user = await users.findOne({ _id: linked.user_id });
        if (!user)
          throw new Error(`GitHub user ${github.id} is linked to user ${linked.user_id}, which does not exist`);
        const current = await followGitHubLogin(user, github);
        await githubUsers.updateOne({ _id: github.id }, { $set: { login: github.login, signed_in_at: now } });
        return current;
      }
      // The user first, then the link under GitHub's id (unique `_id`), so a link never names a
      // missing user; the loser of concurrent first sign-ins drops its unlinked user and takes the winner's.
      const user = await insertGitHubUser(github);
      try {
        await githubUsers.insertOne({
          _id: github.id,
          user_id: user._id,
          login: github.login,
          created_at: now,
          signed_in_at: now,
        });
        return user;
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
        await users.deleteOne({ _id: user._id });
        const winner = await githubUsers.findOne({ _id: github.id });
        const winnerUser = winner ? await users.findOne({ _id: winner.user_id }) : null;
        if (!winnerUser) throw err;
        return winnerUser;
      }
    },
  };
}
