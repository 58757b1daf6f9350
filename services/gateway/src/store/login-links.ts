import { ensureIndexes, isDuplicateKeyError, type Collection, type Db } from '@threadwork/platform';
import { generateLoginToken, hashLoginToken, isWellFormedLoginToken } from '../domain/login-links.js';

export interface LoginLinkDoc {
  /** SHA-256 of the token (hex); the token itself is never stored. */
  _id: string;
  user_id: string;
  created_at: Date;
  expires_at: Date;
  /** When the link was redeemed; null while it is unused. A record: login_link_uses decides. */
  used_at: Date | null;
}

export interface LoginLinkUseDoc {
  /** The link's `_id`: the unique `_id` lets exactly one redemption take it. */
  _id: string;
  used_at: Date;
  /** The link's: a use is swept only with its link, so a replay never finds the link unused. */
  expires_at: Date;
}

/**
 * Expired links are kept a day (to say what happened to one), then swept when a link is made:
 * links are made by hand, rarely, and FerretDB has no TTL indexes.
 */
const KEEP_EXPIRED_MS = 24 * 3600 * 1000;

export interface LoginLinks {
  ensureIndexes(): Promise<void>;
  /** A new link's token for the user, valid for `ttlMs`; shown once, stored as its hash. */
  create(userId: string, ttlMs: number): Promise<string>;
  /** The user id of an unused, unexpired link, which is used from now on; null for any other token. */
  redeem(token: string): Promise<string | null>;
}

/**
 * Who redeems a link is decided by inserting its use under the link's id, not by a conditional
 * update of the link: FerretDB does not make findAndModify atomic, and two replicas redeeming one
 * link at once both "won" it that way. A unique `_id` has exactly one winner on both databases.
 */
export function loginLinkCollection(db: Db): LoginLinks {
  const links: Collection<LoginLinkDoc> = db.collection<LoginLinkDoc>('login_links');
  const uses: Collection<LoginLinkUseDoc> = db.collection<LoginLinkUseDoc>('login_link_uses');
  return {
    async ensureIndexes() {
      await ensureIndexes(links, [
        { key: { expires_at: 1 }, options: { name: 'expires' }, serves: 'sweep links a day after they expire' },
      ]);
      await ensureIndexes(uses, [
        { key: { expires_at: 1 }, options: { name: 'expires' }, serves: 'sweep uses of links swept' },
      ]);
    },

    async create(userId, ttlMs) {
      const token = generateLoginToken();
      const now = new Date();
      await links.insertOne({
        _id: hashLoginToken(token),
        user_id: userId,
        created_at: now,
        expires_at: new Date(now.getTime() + ttlMs),
        used_at: null,
      });
      const horizon = new Date(now.getTime() - KEEP_EXPIRED_MS);
      await links.deleteMany({ expires_at: { $lt: horizon } });
      await uses.deleteMany({ expires_at: { $lt: horizon } });
      return token;
    },

    async redeem(token) {
      if (!isWellFormedLoginToken(token)) return null;
      const id = hashLoginToken(token);
      const now = new Date();
      const link = await links.findOne({ _id: id });
      if (!link || link.used_at !== null || link.expires_at.getTime() <= now.getTime()) return null;
      try {
        await uses.insertOne({ _id: id, used_at: now, expires_at: link.expires_at });
      } catch (err) {
        if (isDuplicateKeyError(err)) return null;
        throw err;
      }
      await links.updateOne({ _id: id }, { $set: { used_at: now } });
      return link.user_id;
    },
  };
}
