import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';

// The GitHub user each of our users is verified as (when OAuth verified one).

/** The GitHub user who completed a setup, as OAuth verified them. */
export interface VerifiedGitHubUser {
  id: number;
  login: string;
  avatar_url: string;
}

export interface GitHubIdentityDoc {
  /**
   * GitHub's user id. Unique, as is `owner_id`: a GitHub user is verified as one of our users and
   * one of our users as one GitHub user, so an installation completed by one GitHub user is never
   * linked to someone else's account.
   */
  _id: number;
  owner_id: string;
  login: string;
  avatar_url: string;
  verified_at: Date;
}

/** What the setup callback recorded before link codes: shown, never trusted for a decision. */
export interface LegacyGitHubUserDoc {
  /** Our user id. */
  _id: string;
  github_id: number;
  login: string;
  avatar_url: string;
  verified_at: Date;
}

export type BindResult =
  { ok: true } | { ok: false; reason: 'owner_is_another_github_user' | 'github_user_is_another_owner' };

export interface IdentityStore {
  ensureIndexes(): Promise<void>;

  /** The GitHub user our user is verified as, if any. */
  identityOf(ownerId: string): Promise<GitHubIdentityDoc | null>;
  /** Our user this GitHub user is verified as, if any. */
  identityByGitHubId(githubId: number): Promise<GitHubIdentityDoc | null>;
  /**
   * Verifies our user as this GitHub user, once and for good (unique inserts): again for the same
   * pair is fine; a user verified as another GitHub user, or a GitHub user verified for another
   * owner, is refused.
   */
  bindIdentity(ownerId: string, user: VerifiedGitHubUser, at: Date): Promise<BindResult>;
  /** The GitHub user shown in the owner's connection: the verified identity (or the old record). */
  user(ownerId: string): Promise<{ github_id: number; login: string; avatar_url: string } | null>;
}

export function createIdentityStore(db: Db): IdentityStore {
  const identities: Collection<GitHubIdentityDoc> = db.collection('github_identities');
  const legacyUsers: Collection<LegacyGitHubUserDoc> = db.collection('github_users');

  return {
    async ensureIndexes() {
      await ensureIndexes(identities, [
        {
          key: { owner_id: 1 },
          options: { name: 'owner_unique', unique: true },
          serves:
            "an owner's verified GitHub user; one GitHub user per owner (the `_id` makes it one owner per GitHub user)",
        },
      ]);
    },

    identityOf: (ownerId) => mongoCall(() => identities.findOne({ owner_id: ownerId })),

    identityByGitHubId: (githubId) => mongoCall(() => identities.findOne({ _id: githubId })),

    async bindIdentity(ownerId, user, at) {
      try {
        await mongoCall(() =>
          identities.insertOne({
            _id: user.id,
            owner_id: ownerId,
            login: user.login,
            avatar_url: user.avatar_url,
            verified_at: at,
          }),
        );
        return { ok: true };
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
      // Either key was taken: by this very pair (verified before), or by someone else.
      const held = await mongoCall(() => identities.findOne({ _id: user.id }));
      if (held && held.owner_id === ownerId) {
        // The login and avatar may have changed on GitHub since.
        await mongoCall(() =>
          identities.updateOne(
            { _id: user.id },
            { $set: { login: user.login, avatar_url: user.avatar_url, verified_at: at } },
          ),
        );
        return { ok: true };
      }
      return { ok: false, reason: held ? 'github_user_is_another_owner' : 'owner_is_another_github_user' };
    },

    async user(ownerId) {
      const identity = await mongoCall(() => identities.findOne({ owner_id: ownerId }));
      if (identity) return { github_id: identity._id, login: identity.login, avatar_url: identity.avatar_url };
      return mongoCall(() => legacyUsers.findOne({ _id: ownerId }));
    },
  };
}
