import type { CollaborationMode, SandboxStatus } from '@threadwork/contracts';
import { ensureIndexes, mongoCall, type Db } from '@threadwork/platform';
import type { Position } from '../domain/cursor.js';
import { insertIfAbsent } from './insert.js';
import type { CandidateStats, ThreadRecord } from './records.js';

/** What recording an admitted run changes on its thread. */
export interface RecordedRun {
  id: string;
  created_at: Date;
  harness: string;
  model: string;
  reasoning_effort: string;
  collaboration_mode: CollaborationMode;
}

/**
 * `updated_at` only moves forward: writers of one thread (creation, domain events, replicas) take
 * their time before their write lands, so a later write may carry an earlier time.
 */
export function createThreadStore(db: Db, now: () => Date = () => new Date()) {
  const threads = db.collection<ThreadRecord>('threads');
  const touched = () => ({ updated_at: now() });

  return {
    async ensureIndexes(): Promise<void> {
      await ensureIndexes(threads, [
        {
          key: { owner_id: 1, created_at: -1, _id: -1 },
          options: { name: 'owner_created' },
          serves:
            "task and work pages: an owner's threads, newest first, after a cursor; threads created in the last minute",
        },
      ]);
    },

    insertThreadIfAbsent: (thread: ThreadRecord) => insertIfAbsent(threads, thread),

    getThread: (threadId: string) => mongoCall(() => threads.findOne({ _id: threadId })),

    findOwnedThread: (ownerId: string, threadId: string) =>
      mongoCall(() => threads.findOne({ _id: threadId, owner_id: ownerId })),

    /** Up to `limit` threads whose first run is recorded, newest first, after `after`. */
    threadPage: (ownerId: string, after: Position | undefined, limit: number) =>
      mongoCall(() =>
        threads
          .find({
            owner_id: ownerId,
            latest_run_id: { $ne: null },
            ...(after
              ? {
                  $or: [
                    { created_at: { $lt: after.createdAt } },
                    { created_at: after.createdAt, _id: { $lt: after.id } },
                  ],
                }
              : {}),
          })
          .sort({ created_at: -1, _id: -1 })
          .limit(limit)
          .toArray(),
      ),

    /** How many threads the owner created since `since` (finished or not: each was an attempt). */
    countThreadsSince: (ownerId: string, since: Date) =>
      mongoCall(() => threads.countDocuments({ owner_id: ownerId, created_at: { $gt: since } })),

    /** Creation time of the owner's `skip`-th thread since `since`, oldest first (null past the last). */
    async threadCreatedSince(ownerId: string, since: Date, skip: number): Promise<Date | null> {
      const found = await mongoCall(() =>
        threads
          .find({ owner_id: ownerId, created_at: { $gt: since } }, { projection: { created_at: 1 } })
          .sort({ created_at: 1, _id: 1 })
          .skip(skip)
          .limit(1)
          .next(),
      );
      return found?.created_at ?? null;
    },

    /**
     * Makes `run` the thread's latest run unless a newer one is recorded already (a replayed or
     * late recording must not move it back). Not exclusive, so a conditional update is enough: two
     * recorders of one run write the same values.
     */
    async recordRun(threadId: string, run: RecordedRun): Promise<void> {
      await mongoCall(() =>
        threads.updateOne(
          {
            _id: threadId,
            // Recording the same run again changes nothing, not even updated_at.
            latest_run_id: { $ne: run.id },
            $or: [{ latest_run_created_at: null }, { latest_run_created_at: { $lte: run.created_at } }],
          },
          {
            $set: {
              latest_run_id: run.id,
              latest_run_created_at: run.created_at,
              harness: run.harness,
              model: run.model,
              reasoning_effort: run.reasoning_effort,
              collaboration_mode: run.collaboration_mode,
            },
            $max: touched(),
          },
        ),
      );
    },

    async setSandboxStatus(threadId: string, status: SandboxStatus, at: Date): Promise<void> {
      await mongoCall(() =>
        threads.updateOne(
          { _id: threadId, $or: [{ sandbox_status_at: null }, { sandbox_status_at: { $lte: at } }] },
          { $set: { sandbox_status: status, sandbox_status_at: at }, $max: touched() },
        ),
      );
    },

    async setCandidateStats(threadId: string, projectRepositoryId: string, stats: CandidateStats): Promise<void> {
      const field = `candidate_stats.${projectRepositoryId}`;
      await mongoCall(() =>
        threads.updateOne(
          { _id: threadId, $or: [{ [field]: { $exists: false } }, { [`${field}.at`]: { $lte: stats.at } }] },
          { $set: { [field]: stats }, $max: touched() },
        ),
      );
    },
  };
}
