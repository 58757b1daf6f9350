import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';
import type { VerifiedGitHubUser } from './identities.js';

// Install sessions and the one-time link codes their setup callbacks mint, each used once.

export interface InstallSessionDoc {
  /** The `state` handed to GitHub: random, single-use. */
  _id: string;
  owner_id: string;
  return_to: string;
  /** base64url(SHA-256(verifier)) of the caller: only that verifier redeems the code the setup mints. */
  code_challenge: string;
  created_at: Date;
  expires_at: Date;
}

export interface SessionUseDoc {
  /** The state; the unique `_id` lets exactly one setup callback consume it. */
  _id: string;
  used_at: Date;
  /** The session's: a use is swept only with its session, so a replay never finds the session again unused. */
  expires_at: Date;
}

export interface LinkCodeDoc {
  /** SHA-256 (hex) of the one-time code handed to `return_to`: the code itself is never stored. */
  _id: string;
  /** The install session's owner: only they may redeem it. */
  owner_id: string;
  /** The install session's challenge, which the redeeming verifier must hash to. */
  code_challenge: string;
  installation_id: number;
  /** Who completed the setup on GitHub; null without an OAuth client (nothing proved it). */
  github_user: VerifiedGitHubUser | null;
  created_at: Date;
  expires_at: Date;
}

export interface LinkCodeUseDoc {
  /** The code's hash; the unique `_id` lets exactly one redemption take it. */
  _id: string;
  used_at: Date;
  /** The code's: a use is swept only with its code. */
  expires_at: Date;
}

export type ConsumeResult = { ok: true; session: InstallSessionDoc } | { ok: false };

export interface InstallSessionStore {
  ensureIndexes(): Promise<void>;

  createSession(session: InstallSessionDoc): Promise<void>;
  /** Takes the session once: unknown, expired or already taken is `{ok: false}`. */
  consumeSession(state: string, now: Date): Promise<ConsumeResult>;

  createLinkCode(code: LinkCodeDoc): Promise<void>;
  /** The code by its hash, used or not, expired or not (the caller decides). */
  linkCode(hash: string): Promise<LinkCodeDoc | null>;
  /** Takes the code once: false when it was taken before. */
  useLinkCode(code: LinkCodeDoc, now: Date): Promise<boolean>;
}

export function createInstallSessionStore(db: Db): InstallSessionStore {
  const sessions: Collection<InstallSessionDoc> = db.collection('install_sessions');
  const uses: Collection<SessionUseDoc> = db.collection('install_session_uses');
  const codes: Collection<LinkCodeDoc> = db.collection('install_link_codes');
  const codeUses: Collection<LinkCodeUseDoc> = db.collection('install_link_code_uses');

  return {
    async ensureIndexes() {
      await ensureIndexes(sessions, [
        {
          key: { expires_at: 1 },
          options: { name: 'expires' },
          serves: 'sweeping expired sessions (no TTL indexes on FerretDB)',
        },
      ]);
      await ensureIndexes(uses, [
        { key: { expires_at: 1 }, options: { name: 'expires' }, serves: 'sweeping uses of sessions swept' },
      ]);
      await ensureIndexes(codes, [
        { key: { expires_at: 1 }, options: { name: 'expires' }, serves: 'sweeping expired link codes' },
      ]);
      await ensureIndexes(codeUses, [
        { key: { expires_at: 1 }, options: { name: 'expires' }, serves: 'sweeping uses of codes swept' },
      ]);
    },

    async createSession(session) {
      await mongoCall(() => sessions.insertOne(session));
      // Expired sessions are swept here, where they are made, instead of by a TTL index.
      const horizon = new Date(session.created_at.getTime() - 24 * 60 * 60 * 1000);
      await mongoCall(() => sessions.deleteMany({ expires_at: { $lt: horizon } }));
      await mongoCall(() => uses.deleteMany({ expires_at: { $lt: horizon } }));
    },

    async consumeSession(state, now) {
      const session = await mongoCall(() => sessions.findOne({ _id: state }));
      if (!session || session.expires_at.getTime() <= now.getTime()) return { ok: false };
      try {
        await mongoCall(() => uses.insertOne({ _id: state, used_at: now, expires_at: session.expires_at }));
      } catch (err) {
        if (isDuplicateKeyError(err)) return { ok: false };
        throw err;
      }
      return { ok: true, session };
    },

    async createLinkCode(code) {
      await mongoCall(() => codes.insertOne(code));
      const horizon = new Date(code.created_at.getTime() - 24 * 60 * 60 * 1000);
      await mongoCall(() => codes.deleteMany({ expires_at: { $lt: horizon } }));
      await mongoCall(() => codeUses.deleteMany({ expires_at: { $lt: horizon } }));
    },

    linkCode: (hash) => mongoCall(() => codes.findOne({ _id: hash })),

    async useLinkCode(code, now) {
      try {
        await mongoCall(() => codeUses.insertOne({ _id: code._id, used_at: now, expires_at: code.expires_at }));
        return true;
      } catch (err) {
        if (isDuplicateKeyError(err)) return false;
        throw err;
      }
    },
  };
}
