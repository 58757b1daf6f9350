import type { CandidateFailedEvent, CandidateProducedEvent } from '@threadwork/contracts';
import {
  isDuplicateKeyError,
  mongoCall,
  OneAtATime,
  unavailable,
  type Collection,
  type Db,
} from '@threadwork/platform';
import type { Snapshot } from '../domain/evidence.js';

/**
 * One document per thread and project repository: the newest candidate (by the event's `at`) and
 * the newest failure to produce one. Fields are flat so each half can be written on its own.
 */
export interface SnapshotDoc {
  /** `${thread_id}:${project_repository_id}`. */
  _id: string;
  owner_id: string;
  thread_id: string;
  project_repository_id: string;
  repository_id: number;
  candidate_run_id?: string;
  candidate_revision?: string;
  base_revision?: string;
  branch?: string;
  diff?: string;
  truncated?: boolean;
  files?: CandidateProducedEvent['files'];
  stats?: CandidateProducedEvent['stats'];
  candidate_at?: Date | null;
  failure_run_id?: string;
  failure_message?: string;
  failure_at?: Date | null;
}

/** How often a write of a newer event goes again after finding an older one stored (newerWins). */
const NEWER_WINS_TRIES = 5;

export const snapshotId = (threadId: string, projectRepositoryId: string) => `${threadId}:${projectRepositoryId}`;

export interface SnapshotStore {
  ensureIndexes(): Promise<void>;
  /** Stores the candidate unless a newer one is stored; a redelivery changes nothing. */
  saveCandidate(event: CandidateProducedEvent): Promise<void>;
  saveFailure(event: CandidateFailedEvent): Promise<void>;
  get(ownerId: string, threadId: string, projectRepositoryId: string): Promise<Snapshot | null>;
}

export function createSnapshotStore(db: Db): SnapshotStore {
  const snapshots: Collection<SnapshotDoc> = db.collection('review_snapshots');
  /** Writes of one document in this process, one at a time (newerWins). */
  const writing = new OneAtATime();

  /**
   * Writes `fields` if the stored `field` is older than `at` (or absent), until what is stored is at
   * least as new as `at`. Events are handled concurrently, on every replica. Two upserts into an
   * absent document both try to insert it, and the one that loses on the unique `_id` may be the
   * newer event's (the duplicate key says only that the document exists now), so each write reads
   * back what is stored and goes again while it is older than its own event; on MongoDB the
   * conditional update then decides. FerretDB does not make that update atomic (two can both
   * apply, the older last), so within a process the writes of one document also go one at a time.
   * Bounded: a write that keeps losing is `unavailable`, and its event redelivered.
   */
  async function newerWins(id: string, field: 'candidate_at' | 'failure_at', at: Date, fields: Partial<SnapshotDoc>) {
    return writing.run(id, () => write(id, field, at, fields));
  }

  async function write(id: string, field: 'candidate_at' | 'failure_at', at: Date, fields: Partial<SnapshotDoc>) {
    for (let tries = 0; tries < NEWER_WINS_TRIES; tries++) {
      try {
        await mongoCall(() =>
          snapshots.updateOne(
            { _id: id, $or: [{ [field]: null }, { [field]: { $lt: at } }] },
            { $set: { ...fields, [field]: at } },
            { upsert: true },
          ),
        );
      } catch (err) {
        if (!isDuplicateKeyError(err)) throw err;
      }
      const stored = await mongoCall(() => snapshots.findOne({ _id: id }, { projection: { [field]: 1 } }));
      const storedAt = stored?.[field];
      if (storedAt && storedAt.getTime() >= at.getTime()) return;
    }
    throw unavailable(`review snapshot ${id} kept being overwritten by older events`);
  }

  return {
    // Read by `_id` only: the primary key serves it.
    async ensureIndexes() {},

    async saveCandidate(event) {
      await newerWins(snapshotId(event.thread_id, event.project_repository_id), 'candidate_at', new Date(event.at), {
        owner_id: event.owner_id,
        thread_id: event.thread_id,
        project_repository_id: event.project_repository_id,
        repository_id: event.repository_id,
        candidate_run_id: event.run_id,
        candidate_revision: event.candidate_revision,
        base_revision: event.base_revision,
        branch: event.branch,
        diff: event.diff,
        truncated: event.truncated,
        files: event.files,
        stats: event.stats,
      });
    },

    async saveFailure(event) {
      await newerWins(snapshotId(event.thread_id, event.project_repository_id), 'failure_at', new Date(event.at), {
        owner_id: event.owner_id,
        thread_id: event.thread_id,
        project_repository_id: event.project_repository_id,
        repository_id: event.repository_id,
        failure_run_id: event.run_id,
        failure_message: event.message,
      });
    },

    async get(ownerId, threadId, projectRepositoryId) {
      const doc = await mongoCall(() => snapshots.findOne({ _id: snapshotId(threadId, projectRepositoryId) }));
      if (!doc || doc.owner_id !== ownerId) return null;
      return {
        candidate: doc.candidate_at
          ? {
              runId: doc.candidate_run_id ?? '',
              revision: doc.candidate_revision ?? '',
              diff: doc.diff ?? '',
              truncated: doc.truncated ?? false,
              files: doc.files ?? [],
              stats: doc.stats ?? { additions: 0, deletions: 0 },
              at: doc.candidate_at,
            }
          : null,
        failure: doc.failure_at
          ? { runId: doc.failure_run_id ?? '', message: doc.failure_message ?? '', at: doc.failure_at }
          : null,
      };
    },
  };
}
