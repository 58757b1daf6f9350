import type { HostedRepository } from '@threadwork/contracts';
import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';

// The installations of the GitHub App as GitHub describes them, which of our users linked which,
// and the cached repository lists of each.

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

export interface UnverifiedLinkDoc {
  /**
   * The installation id. Without an OAuth client nothing proves who installed, so such an
   * installation is linked to one owner only: a guessed id someone already linked is refused.
   */
  _id: number;
  owner_id: string;
  linked_at: Date;
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

export interface InstallationStore {
  ensureIndexes(): Promise<void>;

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
}

export function createInstallationStore(db: Db): InstallationStore {
  const installations: Collection<InstallationDoc> = db.collection('installations');
  const links: Collection<LinkDoc> = db.collection('installation_links');
  const unverified: Collection<UnverifiedLinkDoc> = db.collection('unverified_installation_links');
  const repositories: Collection<GitHubRepositoryDoc> = db.collection('github_repositories');

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
      await ensureIndexes(repositories, [
        {
          key: { installation_id: 1, full_name: 1 },
          options: { name: 'installation_name' },
          serves: 'the repositories of installations, by name; a refresh deleting what it did not see',
        },
      ]);
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
  };
}
