import { ensureIndexes, mongoCall, type Db } from '@threadwork/platform';
import { insertIfAbsent } from './insert.js';
import type { ThreadRecord, WaitRecord } from './records.js';

export function createWaitStore(db: Db) {
  const waits = db.collection<WaitRecord>('capacity_waits');

  return {
    async ensureIndexes(): Promise<void> {
      await ensureIndexes(waits, [
        {
          key: { owner_id: 1, since: 1 },
          options: { name: 'owner_since' },
          serves: "when one of an owner's runs ends: the owner's threads waiting for room, longest waiting first",
        },
        {
          key: { since: 1 },
          options: { name: 'since' },
          serves: 'the sweep: waiting threads of any owner, longest waiting first',
        },
      ]);
    },

    /** The thread waits for room (again): inserted once, then only its `at` moves on. */
    async markWaiting(thread: Pick<ThreadRecord, '_id' | 'owner_id'>): Promise<void> {
      const now = new Date();
      if (await insertIfAbsent(waits, { _id: thread._id, owner_id: thread.owner_id, since: now, at: now })) return;
      await mongoCall(() => waits.updateOne({ _id: thread._id }, { $set: { at: now } }));
    },

    /** Up to `limit` of the owner's waiting threads, longest waiting first. */
    ownerWaits: (ownerId: string, limit: number) =>
      mongoCall(() => waits.find({ owner_id: ownerId }).sort({ since: 1, _id: 1 }).limit(limit).toArray()),

    /** Up to `limit` waiting threads of any owner, longest waiting first. */
    oldestWaits: (limit: number) => mongoCall(() => waits.find({}).sort({ since: 1, _id: 1 }).limit(limit).toArray()),

    /**
     * Removes a wait as it was seen: one refused again since (a newer `at`) stays, so a refusal
     * racing the clearing is not forgotten.
     */
    async clearWait(wait: WaitRecord): Promise<void> {
      await mongoCall(() => waits.deleteOne({ _id: wait._id, at: wait.at }));
    },
  };
}
