import type { ControlStatus } from '@threadwork/contracts';
import { ensureIndexes, mongoCall, type Db } from '@threadwork/platform';
import { insertIfAbsent } from './insert.js';
import type { ControlRecord } from './records.js';

export function createControlStore(db: Db) {
  const controls = db.collection<ControlRecord>('controls');

  return {
    async ensureIndexes(): Promise<void> {
      await ensureIndexes(controls, [
        {
          key: { thread_id: 1, status: 1, created_at: 1, _id: 1 },
          options: { name: 'thread_status_created' },
          serves: "the oldest pending control of a thread; a thread's controls filtered by status",
        },
        {
          key: { thread_id: 1, created_at: 1, _id: 1 },
          options: { name: 'thread_created' },
          serves: "a thread's controls, oldest first",
        },
      ]);
    },

    insertControlIfAbsent: (control: ControlRecord) => insertIfAbsent(controls, control),

    getControl: (controlId: string) => mongoCall(() => controls.findOne({ _id: controlId })),

    oldestPendingControl: (threadId: string) =>
      mongoCall(() =>
        controls.find({ thread_id: threadId, status: 'pending' }).sort({ created_at: 1, _id: 1 }).limit(1).next(),
      ),

    /** The pending control whose admission chose this run id, if any (its run may exist already). */
    pendingControlForRun: (threadId: string, runId: string) =>
      mongoCall(() => controls.findOne({ thread_id: threadId, status: 'pending', run_id: runId })),

    listControls: (threadId: string, status: ControlStatus | undefined) =>
      mongoCall(() =>
        controls
          .find({ thread_id: threadId, ...(status ? { status } : {}) })
          .sort({ created_at: 1, _id: 1 })
          .toArray(),
      ),

    /** Whether a control still waiting to admit its run carries this message. */
    hasPendingControlFor: async (threadId: string, messageId: string) =>
      (await mongoCall(() => controls.findOne({ thread_id: threadId, message_id: messageId, status: 'pending' }))) !==
      null,

    /**
     * pending → applied. Two appliers of the same control agree on what they write (the run is the
     * one its admission key names), so the update need not be exclusive.
     */
    async markControlApplied(
      controlId: string,
      { createdRunId, at }: { createdRunId: string | null; at: Date },
    ): Promise<void> {
      await mongoCall(() =>
        controls.updateOne(
          { _id: controlId, status: 'pending' },
          { $set: { status: 'applied', applied_at: at, created_run_id: createdRunId } },
        ),
      );
    },
  };
}
