import { ensureIndexes, type Collection, type Db } from '@threadwork/platform';
import { generateLoginToken, hashLoginToken, isWellFormedLoginToken } from '../domain/login-links.js';

export interface LoginLinkDoc {
  /** SHA-256 of the token (hex); the token itself is never stored. */
  _id: string;
  user_id: string;
  created_at: Date;
  expires_at: Date;
  /** When the link was redeemed; null while it is unused. */
  used_at: Date | null;
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

export function loginLinkCollection(db: Db): LoginLinks {
  const links: Collection<LoginLinkDoc> = db.collection<LoginLinkDoc>('login_links');
  return {
    async ensureIndexes() {
      await ensureIndexes(links, [
        {
          key: { expires_at: 1 },
          options: { name: 'expires_at' },
          serves: 'sweep links a day after they expire',
        },
      ]);
    },

    async create(userId, ttlMs) {
      const token = generateLoginToken();
      const now = new Date();
      await links.deleteMany({ expires_at: { $lt: new Date(now.getTime() - KEEP_EXPIRED_MS) } });
      await links.insertOne({
        _id: hashLoginToken(token),
        user_id: userId,
        created_at: now,
        expires_at: new Date(now.getTime() + ttlMs),
        used_at: null,
      });
      return token;
    },

    async redeem(token) {
      if (!isWellFormedLoginToken(token)) return null;
      const now = new Date();
      // One update finds and spends the link: of two replicas redeeming it at once, one wins.
      const spent = await links.findOneAndUpdate(
        { _id: hashLoginToken(token), used_at: null, expires_at: { $gt: now } },
        { $set: { used_at: now } },
      );
      return spent?.user_id ?? null;
    },
  };
}
