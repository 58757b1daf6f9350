import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';

/**
 * One row per repository id a provider has handed out. Ids of the `local` provider are hashes of
 * names, so two names can collide: the unique index on `repository_id` lets the first name keep
 * the id for good and turns every later one into a detected collision instead of a silent alias.
 */
export interface RepositoryDoc {
  /** `<provider>:<full_name>`: one row per repository of a provider. */
  _id: string;
  provider: string;
  full_name: string;
  repository_id: number;
  registered_at: Date;
}

export type Registration = { ok: true; repositoryId: number } | { ok: false; takenBy: string };

export interface RepositoryStore {
  ensureIndexes(): Promise<void>;
  /**
   * The id `fullName` keeps: the recorded one when it was registered before, else `proposedId`
   * if no other repository holds it. Converges when called again or concurrently.
   */
  register(input: { provider: string; fullName: string; proposedId: number }): Promise<Registration>;
}

export function createRepositoryStore(db: Db): RepositoryStore {
  const repositories: Collection<RepositoryDoc> = db.collection<RepositoryDoc>('repositories');

  return {
    async ensureIndexes() {
      await ensureIndexes(repositories, [
        {
          key: { repository_id: 1 },
          options: { name: 'repository_id_unique', unique: true },
          serves: 'which repository holds an id (collision report); one repository per id',
        },
      ]);
    },

    async register({ provider, fullName, proposedId }) {
      const _id = `${provider}:${fullName}`;
      const recorded = await mongoCall(() => repositories.findOne({ _id }));
      if (recorded) return { ok: true, repositoryId: recorded.repository_id };
      try {
        await mongoCall(() =>
          repositories.insertOne({
            _id,
            provider,
            full_name: fullName,
            repository_id: proposedId,
            registered_at: new Date(),
          }),
        );
        return { ok: true, repositoryId: proposedId };
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
      // Lost a race: to another replica registering the same repository, or to another name
      // holding the id.
      const same = await mongoCall(() => repositories.findOne({ _id }));
      if (same) return { ok: true, repositoryId: same.repository_id };
      const holder = await mongoCall(() => repositories.findOne({ repository_id: proposedId }));
      return { ok: false, takenBy: holder?.full_name ?? 'another repository' };
    },
  };
}
