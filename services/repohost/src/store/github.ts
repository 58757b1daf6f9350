import type { HostedRepository } from '@threadwork/contracts';
import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';

// The GitHub side of repohost's collections: installations (as GitHub describes them), which of
// our users linked which installation, install sessions and their single use, the cached
// repository lists, the GitHub user behind each of our users (when OAuth verified one), and the
// webhook deliveries already taken.

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

export interface GitHubUserDoc {
  /** Our user id. */
  _id: string;
  github_id: number;
  login: string;
  avatar_url: string;
  verified_at: Date;
}

export interface DeliveryDoc {
  /** `X-GitHub-Delivery`: the unique `_id` takes each delivery once. */
  _id: string;
  event: string;
  received_at: Date;
}

/** Deliveries are remembered this long; GitHub redelivers (by hand or API) within days, not weeks. */
const DELIVERY_RETENTION_MS = 14 * 24 * 60 * 60 * 1000;

export type ConsumeResult = { ok: true; session: InstallSessionDoc } | { ok: false };

export interface GitHubStore {
  ensureIndexes(): Promise<void>;

  createSession(session: InstallSessionDoc): Promise<void>;
  /** Takes the session once: unknown, expired or already taken is `{ok: false}`. */
  consumeSession(state: string, now: Date): Promise<ConsumeResult>;

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

  saveUser(doc: GitHubUserDoc): Promise<void>;
  user(ownerId: string): Promise<GitHubUserDoc | null>;

  /** Records a delivery; false when it was recorded before. */
  recordDelivery(delivery: string, event: string, now: Date): Promise<boolean>;
  /** Undoes `recordDelivery` when the delivery could not be queued, so GitHub's retry is taken. */
  forgetDelivery(delivery: string): Promise<void>;
}

export function createGitHubStore(db: Db): GitHubStore {
  const installations: Collection<InstallationDoc> = db.collection('installations');
  const links: Collection<LinkDoc> = db.collection('installation_links');
  const sessions: Collection<InstallSessionDoc> = db.collection('install_sessions');
  const uses: Collection<SessionUseDoc> = db.collection('install_session_uses');
  const repositories: Collection<GitHubRepositoryDoc> = db.collection('github_repositories');
  const users: Collection<GitHubUserDoc> = db.collection('github_users');
  const deliveries: Collection<DeliveryDoc> = db.collection('webhook_deliveries');

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

    async saveUser(doc) {
      const { _id, ...fields } = doc;
      await mongoCall(() => users.updateOne({ _id }, { $set: fields }, { upsert: true }));
    },

    user: (ownerId) => mongoCall(() => users.findOne({ _id: ownerId })),

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
  };
}
