import type {
  ChecksAggregate,
  PublicationCheck,
  PublicationCommitStatus,
  PublicationState,
} from '@threadwork/contracts';
import { ensureIndexes, mongoCall, type Collection, type Db } from '@threadwork/platform';

/** The pull request of one thread in one of its repositories, as last read from GitHub. */
export interface PublicationDoc {
  /** `${thread_id}:${project_repository_id}`: one pull request per thread branch. */
  _id: string;
  owner_id: string;
  thread_id: string;
  project_repository_id: string;
  repository_id: number;
  installation_id: number;
  /** Repository owner and name on GitHub, for API paths. */
  owner: string;
  name: string;
  branch: string;
  base_branch: string;
  pr_number: number;
  pr_url: string;
  head_sha: string;
  state: PublicationState;
  mergeable: boolean | null;
  mergeable_state: string;
  checks: PublicationCheck[];
  commit_statuses: PublicationCommitStatus[];
  checks_aggregate: ChecksAggregate;
  last_synced_at: Date;
  /** Time of the newest candidate published here: an older one redelivered late changes nothing. */
  candidate_at: Date;
  candidate_revision: string;
}

export type PullFacts = Pick<
  PublicationDoc,
  | 'pr_number'
  | 'pr_url'
  | 'head_sha'
  | 'state'
  | 'mergeable'
  | 'mergeable_state'
  | 'checks'
  | 'commit_statuses'
  | 'checks_aggregate'
  | 'last_synced_at'
>;

export interface PublicationStore {
  ensureIndexes(): Promise<void>;
  get(id: string): Promise<PublicationDoc | null>;
  /** Writes a publication after a candidate was published (creating it the first time). */
  saveCandidate(doc: PublicationDoc): Promise<void>;
  /**
   * Stores what a sync read from GitHub, unless a sync that began reading later already stored
   * its own (webhooks and reads sync concurrently; the read begun later is the truer one, even
   * when a slow answer makes the earlier one end last), or the publication has moved on to another
   * pull request (a merged one's follower) since the sync read its pull request.
   */
  saveSync(id: string, facts: PullFacts): Promise<void>;
  byPull(repositoryId: number, prNumber: number): Promise<PublicationDoc[]>;
  byHead(repositoryId: number, headSha: string): Promise<PublicationDoc[]>;
}

export function createPublicationStore(db: Db): PublicationStore {
  const publications: Collection<PublicationDoc> = db.collection('publications');

  return {
    async ensureIndexes() {
      await ensureIndexes(publications, [
        {
          key: { repository_id: 1, pr_number: 1 },
          options: { name: 'repository_pull' },
          serves: 'pull_request webhooks: the publication of a pull request',
        },
        {
          key: { repository_id: 1, head_sha: 1 },
          options: { name: 'repository_head' },
          serves: 'check_run, check_suite and status webhooks: publications at a commit',
        },
      ]);
    },

    get: (id) => mongoCall(() => publications.findOne({ _id: id })),

    async saveCandidate(doc) {
      const { _id, ...fields } = doc;
      await mongoCall(() => publications.updateOne({ _id }, { $set: fields }, { upsert: true }));
    },

    async saveSync(id, facts) {
      await mongoCall(() =>
        publications.updateOne(
          { _id: id, pr_number: facts.pr_number, last_synced_at: { $lte: facts.last_synced_at } },
          { $set: facts },
        ),
      );
    },

    byPull: (repositoryId, prNumber) =>
      mongoCall(() => publications.find({ repository_id: repositoryId, pr_number: prNumber }).toArray()),

    byHead: (repositoryId, headSha) =>
      mongoCall(() => publications.find({ repository_id: repositoryId, head_sha: headSha }).toArray()),
  };
}
