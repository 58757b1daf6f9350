import type { HostedRepository } from '@threadwork/contracts';
import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';

// The GitHub side of repohost's collections: installations (as GitHub describes them), which of
// our users linked which installation, install sessions and the one-time link codes their setup
// callbacks mint (each used once), the cached repository lists, the GitHub user each of our users
// is verified as (when OAuth verified one), and the webhook deliveries already taken.

export interface InstallationDoc {
  /** GitHub's installation id. */
  _id: number;
  account: { login: string; id: number; avatar_url: string };
  target_type: string;
  repository_selection: string;
  html_url: string;
  suspended: boolean;
  /** GitHub's creation time: an installation made before a session started is not linked without OAuth. */
  created_at: Date;
  /** When this description was last read from GitHub (or a webhook). */
  refreshed_at: Date;
  /** When the repository list was last read in full; null or absent forces a read on the next list. */
  repositories_synced_at?: Date | null;
}

export interface LinkDoc {
  /** `${owner_id}:${installation_id}`: one link per user and installation. */
  _id: string;
  owner_id: string;
  installation_id: number;
  linked_at: Date;
}

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

/** The GitHub user who completed a setup, as OAuth verified them. */
export interface VerifiedGitHubUser {
  id: number;
  login: string;
  avatar_url: string;
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

export interface UnverifiedLinkDoc {
  /**
   * The installation id. Without an OAuth client nothing proves who installed, so such an
   * installation is linked to one owner only: a guessed id someone already linked is refused.
   */
  _id: number;
  owner_id: string;
  linked_at: Date;
}

export interface SessionUseDoc {
  /** The state; the unique `_id` lets exactly one setup callback consume it. */
  _id: string;
  used_at: Date;
  /** The session's: a use is swept only with its session, so a replay never finds the session again unused. */
  expires_at: Date;
}

export interface GitHubRepositoryDoc {
  /** GitHub's repository id. */
  _id: number;
  installation_id: number;
  owner: string;
  name: string;
  full_name: string;
  clone_url: string;
  avatar_url: string;
  private: boolean;
  default_branch: string;
  /** Time of the write: a refresh deletes what it did not write after it started. */
  seen_at: Date;
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

export interface DeliveryDoc {
  /** `X-GitHub-Delivery`: the unique `_id` takes each delivery once. */
  _id: string;
  event: string;
  received_at: Date;
}

export interface WebhookBodyDoc {
  /**
   * SHA-256 of a delivered body. GitHub signs the body only, not `X-GitHub-Delivery`: the unique
   * `_id` ties a signed body to the one delivery that brought it, so the same bytes sent again
   * under a new delivery id are known for a replay.
   */
  _id: string;
  delivery: string;
  received_at: Date;
}

export type BodyRecord = 'new' | 'same_delivery' | 'other_delivery';

/** Deliveries are remembered this long; GitHub redelivers (by hand or API) within days, not weeks. */
const DELIVERY_RETENTION_MS = 14 * 24 * 60 * 60 * 1000;

export type ConsumeResult = { ok: true; session: InstallSessionDoc } | { ok: false };

export interface GitHubStore {
  ensureIndexes(): Promise<void>;

  createSession(session: InstallSessionDoc): Promise<void>;
  /** Takes the session once: unknown, expired or already taken is `{ok: false}`. */
  consumeSession(state: string, now: Date): Promise<ConsumeResult>;

  createLinkCode(code: LinkCodeDoc): Promise<void>;
  /** The code by its hash, used or not, expired or not (the caller decides). */
  linkCode(hash: string): Promise<LinkCodeDoc | null>;
  /** Takes the code once: false when it was taken before. */
  useLinkCode(code: LinkCodeDoc, now: Date): Promise<boolean>;

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
  /** Takes an installation linked without OAuth for one owner: false when another owner has it. */
  claimUnverified(installationId: number, ownerId: string, at: Date): Promise<boolean>;

  saveInstallation(doc: Omit<InstallationDoc, 'repositories_synced_at'>): Promise<void>;
  installation(id: number): Promise<InstallationDoc | null>;
  installations(ids: readonly number[]): Promise<InstallationDoc[]>;
  /** The next repository list reads GitHub again. */
  markRepositoriesStale(installationId: number): Promise<void>;
  /** Forgets an installation that was uninstalled: its links and cached repositories too. */
  deleteInstallation(id: number): Promise<void>;

  link(ownerId: string, installationId: number, at: Date): Promise<void>;
  linkedInstallationIds(ownerId: string): Promise<number[]>;
  /** Owners who linked the installation. */
  ownersOf(installationId: number): Promise<string[]>;

  /** Replaces an installation's cached repositories with what GitHub listed. */
  replaceRepositories(
    installationId: number,
    repositories: readonly HostedRepository[],
    startedAt: Date,
  ): Promise<void>;
  repositoriesOf(installationIds: readonly number[]): Promise<GitHubRepositoryDoc[]>;
  repository(id: number): Promise<GitHubRepositoryDoc | null>;
  /** Applies a `repository` webhook (rename, visibility, default branch) to a cached repository. */
  updateRepository(id: number, fields: Omit<GitHubRepositoryDoc, '_id' | 'installation_id' | 'seen_at'>): Promise<void>;
  deleteRepositories(ids: readonly number[]): Promise<void>;

  /** The GitHub user shown in the owner's connection: the verified identity (or the old record). */
  user(ownerId: string): Promise<{ github_id: number; login: string; avatar_url: string } | null>;

  /** Records a delivery; false when it was recorded before. */
  recordDelivery(delivery: string, event: string, now: Date): Promise<boolean>;
  /** Undoes `recordDelivery` when the delivery could not be queued, so GitHub's retry is taken. */
  forgetDelivery(delivery: string): Promise<void>;
  /** Ties a body (its hash) to the delivery that brought it, kept as long as deliveries are. */
  recordBody(hash: string, delivery: string, now: Date): Promise<BodyRecord>;
  /** Undoes `recordBody` for this delivery (the delivery could not be queued). */
  forgetBody(hash: string, delivery: string): Promise<void>;
}

export function createGitHubStore(db: Db): GitHubStore {
  const installations: Collection<InstallationDoc> = db.collection('installations');
  const links: Collection<LinkDoc> = db.collection('installation_links');
  const sessions: Collection<InstallSessionDoc> = db.collection('install_sessions');
  const uses: Collection<SessionUseDoc> = db.collection('install_session_uses');
  const repositories: Collection<GitHubRepositoryDoc> = db.collection('github_repositories');
  const codes: Collection<LinkCodeDoc> = db.collection('install_link_codes');
  const codeUses: Collection<LinkCodeUseDoc> = db.collection('install_link_code_uses');
  const identities: Collection<GitHubIdentityDoc> = db.collection('github_identities');
  const unverified: Collection<UnverifiedLinkDoc> = db.collection('unverified_installation_links');
  const legacyUsers: Collection<LegacyGitHubUserDoc> = db.collection('github_users');
  const deliveries: Collection<DeliveryDoc> = db.collection('webhook_deliveries');
  const bodies: Collection<WebhookBodyDoc> = db.collection('webhook_bodies');

  return {
    async ensureIndexes() {
      await ensureIndexes(links, [
        { key: { owner_id: 1 }, options: { name: 'owner' }, serves: "an owner's linked installations" },
        {
          key: { installation_id: 1 },
          options: { name: 'installation' },
          serves: 'who linked an installation; unlink on uninstall',
        },
      ]);
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
      await ensureIndexes(identities, [
        {
          key: { owner_id: 1 },
          options: { name: 'owner_unique', unique: true },
          serves:
            "an owner's verified GitHub user; one GitHub user per owner (the `_id` makes it one owner per GitHub user)",
        },
      ]);
      await ensureIndexes(repositories, [
        {
          key: { installation_id: 1, full_name: 1 },
          options: { name: 'installation_name' },
          serves: 'the repositories of installations, by name; a refresh deleting what it did not see',
        },
      ]);
      await ensureIndexes(deliveries, [
        {
          key: { received_at: 1 },
          options: { name: 'received' },
          serves: 'sweeping deliveries older than the retention',
        },
      ]);
      await ensureIndexes(bodies, [
        {
          key: { received_at: 1 },
          options: { name: 'received' },
          serves: 'sweeping bodies older than the retention',
        },
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

    async claimUnverified(installationId, ownerId, at) {
      try {
        await mongoCall(() => unverified.insertOne({ _id: installationId, owner_id: ownerId, linked_at: at }));
        return true;
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
      const held = await mongoCall(() => unverified.findOne({ _id: installationId }));
      return held?.owner_id === ownerId;
    },

    async saveInstallation(doc) {
      const { _id, ...fields } = doc;
      await mongoCall(() => installations.updateOne({ _id }, { $set: fields }, { upsert: true }));
    },

    installation: (id) => mongoCall(() => installations.findOne({ _id: id })),

    installations: (ids) =>
      ids.length === 0
        ? Promise.resolve([])
        : mongoCall(() => installations.find({ _id: { $in: [...ids] } }).toArray()),

    async markRepositoriesStale(installationId) {
      await mongoCall(() =>
        installations.updateOne({ _id: installationId }, { $set: { repositories_synced_at: null } }),
      );
    },

    async deleteInstallation(id) {
      await mongoCall(() => links.deleteMany({ installation_id: id }));
      await mongoCall(() => unverified.deleteOne({ _id: id }));
      await mongoCall(() => repositories.deleteMany({ installation_id: id }));
      await mongoCall(() => installations.deleteOne({ _id: id }));
    },

    async link(ownerId, installationId, at) {
      try {
        await mongoCall(() =>
          links.insertOne({
            _id: `${ownerId}:${installationId}`,
            owner_id: ownerId,
            installation_id: installationId,
            linked_at: at,
          }),
        );
      } catch (err) {
        // Linked before (an `update` setup, a second install session): nothing to change.
        if (!isDuplicateKeyError(err)) throw err;
      }
    },

    async linkedInstallationIds(ownerId) {
      const found = await mongoCall(() => links.find({ owner_id: ownerId }).toArray());
      return found.map((link) => link.installation_id).sort((a, b) => a - b);
    },

    async ownersOf(installationId) {
      const found = await mongoCall(() => links.find({ installation_id: installationId }).toArray());
      return found.map((link) => link.owner_id);
    },

    async replaceRepositories(installationId, listed, startedAt) {
      for (const repository of listed) {
        const doc: Omit<GitHubRepositoryDoc, '_id'> = {
          installation_id: installationId,
          owner: repository.owner,
          name: repository.name,
          full_name: repository.full_name,
          clone_url: repository.clone_url,
          avatar_url: repository.avatar_url,
          private: repository.private,
          default_branch: repository.default_branch,
          seen_at: new Date(),
        };
        await mongoCall(() =>
          repositories.updateOne({ _id: repository.repository_id }, { $set: doc }, { upsert: true }),
        );
      }
      // Anything of this installation not written since the refresh started is gone from it. A
      // concurrent refresh only writes later times, so it never loses the other's writes.
      await mongoCall(() => repositories.deleteMany({ installation_id: installationId, seen_at: { $lt: startedAt } }));
      await mongoCall(() =>
        installations.updateOne({ _id: installationId }, { $set: { repositories_synced_at: new Date() } }),
      );
    },

    repositoriesOf: (installationIds) =>
      installationIds.length === 0
        ? Promise.resolve([])
        : mongoCall(() =>
            repositories
              .find({ installation_id: { $in: [...installationIds] } })
              .sort({ full_name: 1 })
              .toArray(),
          ),

    repository: (id) => mongoCall(() => repositories.findOne({ _id: id })),

    async updateRepository(id, fields) {
      await mongoCall(() => repositories.updateOne({ _id: id }, { $set: fields }));
    },

    async deleteRepositories(ids) {
      if (ids.length === 0) return;
      await mongoCall(() => repositories.deleteMany({ _id: { $in: [...ids] } }));
    },

    async user(ownerId) {
      const identity = await mongoCall(() => identities.findOne({ owner_id: ownerId }));
      if (identity) return { github_id: identity._id, login: identity.login, avatar_url: identity.avatar_url };
      return mongoCall(() => legacyUsers.findOne({ _id: ownerId }));
    },

    async recordDelivery(delivery, event, now) {
      try {
        await mongoCall(() => deliveries.insertOne({ _id: delivery, event, received_at: now }));
      } catch (err) {
        if (isDuplicateKeyError(err)) return false;
        throw err;
      }
      await mongoCall(() =>
        deliveries.deleteMany({ received_at: { $lt: new Date(now.getTime() - DELIVERY_RETENTION_MS) } }),
      );
      return true;
    },

    async forgetDelivery(delivery) {
      await mongoCall(() => deliveries.deleteOne({ _id: delivery }));
    },

    async recordBody(hash, delivery, now) {
      for (;;) {
        try {
          await mongoCall(() => bodies.insertOne({ _id: hash, delivery, received_at: now }));
          break;
        } catch (err) {
          if (!isDuplicateKeyError(err)) throw err;
        }
        const held = await mongoCall(() => bodies.findOne({ _id: hash }));
        if (held) return held.delivery === delivery ? 'same_delivery' : 'other_delivery';
        // Forgotten in between (its delivery could not be queued): try to take it again.
      }
      await mongoCall(() =>
        bodies.deleteMany({ received_at: { $lt: new Date(now.getTime() - DELIVERY_RETENTION_MS) } }),
      );
      return 'new';
    },

    async forgetBody(hash, delivery) {
      await mongoCall(() => bodies.deleteOne({ _id: hash, delivery }));
    },
  };
}
