import { ensureIndexes, mongoCall, type Db } from '@threadwork/platform';
import type { Position } from '../domain/cursor.js';
import { insertIfAbsent } from './insert.js';
import type { MessageRecord } from './records.js';

export function createMessageStore(db: Db) {
  const messages = db.collection<MessageRecord>('messages');

  return {
    async ensureIndexes(): Promise<void> {
      await ensureIndexes(messages, [
        {
          key: { thread_id: 1, visible: 1, created_at: 1, _id: 1 },
          options: { name: 'thread_page' },
          serves: "message pages: a thread's shown messages oldest first, after a (created_at, _id) cursor",
        },
        {
          key: { run_id: 1 },
          options: { name: 'run' },
          serves: 'show the user message of a run when a status event of that run arrives',
        },
        {
          key: { visible: 1, created_at: 1 },
          options: { name: 'hidden_created' },
          serves: 'the sweep: hidden messages older than the idempotency window',
        },
      ]);
    },

    insertMessageIfAbsent: (message: MessageRecord) => insertIfAbsent(messages, message),

    /**
     * hidden → shown, with the text, run and time of the admission that shows it. Visibility only
     * ever goes from hidden to shown, so concurrent showers (twins of one admission, or a run's
     * status event) cannot undo one another even where a write replaces the whole document.
     */
    async showMessage(id: string, shown: Pick<MessageRecord, 'parts' | 'run_id' | 'created_at'>): Promise<void> {
      await mongoCall(() => messages.updateOne({ _id: id, visible: false }, { $set: { ...shown, visible: true } }));
    },

    async showRunMessages(runId: string): Promise<void> {
      await mongoCall(() => messages.updateMany({ run_id: runId, visible: false }, { $set: { visible: true } }));
    },

    /** Up to `limit` shown messages after `after`, oldest first. */
    messagePage: (threadId: string, after: Position | undefined, limit: number) =>
      mongoCall(() =>
        messages
          .find({
            thread_id: threadId,
            visible: true,
            ...(after
              ? {
                  $or: [
                    { created_at: { $gt: after.createdAt } },
                    { created_at: after.createdAt, _id: { $gt: after.id } },
                  ],
                }
              : {}),
          })
          .sort({ created_at: 1, _id: 1 })
          .limit(limit)
          .toArray(),
      ),

    /** Up to `limit` messages still hidden that were written before `before`, oldest first. */
    hiddenMessagesBefore: (before: Date, limit: number) =>
      mongoCall(() =>
        messages
          .find({ visible: false, created_at: { $lt: before } })
          .sort({ created_at: 1 })
          .limit(limit)
          .toArray(),
      ),

    deleteHiddenMessage: (id: string) => mongoCall(() => messages.deleteOne({ _id: id, visible: false })),
  };
}
