import type { CollaborationMode, ControlStatus, SandboxStatus } from '@threadwork/contracts';
import {
  conflict,
  ensureIndexes,
  isDuplicateKeyError,
  mongoCall,
  unavailable,
  type Collection,
  type Db,
  type Document,
} from '@threadwork/platform';
import type { Position } from '../domain/cursor.js';
import type {
  CandidateStats,
  ControlRecord,
  MessageRecord,
  ProjectRecord,
  RequestRecord,
  ThreadRecord,
  WaitRecord,
} from './records.js';

/** What recording an admitted run changes on its thread. */
export interface RecordedRun {
  id: string;
  created_at: Date;
  harness: string;
  model: string;
  reasoning_effort: string;
  collaboration_mode: CollaborationMode;
}

export type ThreadsStore = ReturnType<typeof createThreadsStore>;

/** Inserts unless a document with the same unique key exists; false when it did (someone else won). */
async function insertIfAbsent<T extends Document>(collection: Collection<T>, doc: T): Promise<boolean> {
  try {
    await mongoCall(() => collection.insertOne(doc as Parameters<Collection<T>['insertOne']>[0]));
    return true;
  } catch (err) {
    if (isDuplicateKeyError(err)) return false;
    throw err;
  }
}

/**
 * The collections threads owns (DESIGN.md section 1). Every "exactly one wins" decision here is an
 * insert against a unique index, never a conditional update: FerretDB does not make those atomic.
 */
export interface ThreadsStoreOptions {
  /** How long an idempotency record binds its `client_request_id`. */
  idempotencyTtlMs: number;
}

export function createThreadsStore(db: Db, { idempotencyTtlMs }: ThreadsStoreOptions) {
  const projects = db.collection<ProjectRecord>('projects');
  const threads = db.collection<ThreadRecord>('threads');
  const messages = db.collection<MessageRecord>('messages');
  const controls = db.collection<ControlRecord>('controls');
  const requests = db.collection<RequestRecord>('requests');
  const waits = db.collection<WaitRecord>('capacity_waits');

  return {
    async ensureIndexes(): Promise<void> {
      await ensureIndexes(projects, [
        {
          key: { key: 1 },
          options: { name: 'key_unique', unique: true },
          serves: "find-or-create the project of an owner's ordered repository set; one project per set",
        },
      ]);
      await ensureIndexes(threads, [
        {
          key: { owner_id: 1, created_at: -1, _id: -1 },
          options: { name: 'owner_created' },
          serves:
            "task and work pages: an owner's threads, newest first, after a cursor; threads created in the last minute",
        },
      ]);
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
      await ensureIndexes(requests, [
        {
          key: { created_at: 1 },
          options: { name: 'created' },
          serves: 'the sweep: idempotency records past their window (claims look up by _id)',
        },
      ]);
    },

    /**
     * Binds a client_request_id to a request: the first caller's insert wins and fixes the ids; any
     * later caller with the same request gets those ids, with a different one a conflict.
     */
    async claimRequest<Ids extends Record<string, string>>(
      key: string,
      ownerId: string,
      bodyHash: string,
      candidate: Ids,
    ): Promise<Ids> {
      // Twice at most: a record found past its window is removed and the claim made afresh.
      for (let attempt = 0; ; attempt++) {
        const now = new Date();
        const record: RequestRecord<Ids> = {
          _id: key,
          owner_id: ownerId,
          body_hash: bodyHash,
          ids: candidate,
          created_at: now,
        };
        if (await insertIfAbsent(requests as unknown as Collection<RequestRecord<Ids>>, record)) return candidate;
        const winner = await mongoCall(() => requests.findOne({ _id: key }));
        // The duplicate-key error means the winner's document is committed; not finding it is a
        // transient oddity of the server (or a sweep that just removed it), worth a retry rather
        // than a second set of ids.
        if (!winner) throw unavailable('idempotency record not readable yet');
        if (winner.created_at.getTime() <= now.getTime() - idempotencyTtlMs && attempt === 0) {
          // Expired: the id is free. Removed only as found (same time), so a fresh claim that
          // raced us here is never the one removed; whoever inserts next wins, as for a new id.
          await mongoCall(() => requests.deleteOne({ _id: key, created_at: winner.created_at }));
          continue;
        }
        if (winner.body_hash !== bodyHash) {
          throw conflict('idempotency_conflict', 'client_request_id was already used with a different request');
        }
        return winner.ids as Ids;
      }
    },

    /** Whether a `client_request_id` is bound already (a replay, or a twin of a request in flight). */
    async hasRequest(key: string): Promise<boolean> {
      const record = await mongoCall(() => requests.findOne({ _id: key }));
      return record !== null && record.created_at.getTime() > Date.now() - idempotencyTtlMs;
    },

    /** Idempotency records past their window, removed (claims treat them as absent already). */
    async sweepRequests(now: Date): Promise<number> {
      const before = new Date(now.getTime() - idempotencyTtlMs);
      const { deletedCount } = await mongoCall(() => requests.deleteMany({ created_at: { $lt: before } }));
      return deletedCount;
    },

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

    /** Whether a control still waiting to admit its run carries this message. */
    hasPendingControlFor: async (threadId: string, messageId: string) =>
      (await mongoCall(() => controls.findOne({ thread_id: threadId, message_id: messageId, status: 'pending' }))) !==
      null,

    async findOrCreateProject(project: ProjectRecord): Promise<ProjectRecord> {
      const existing = await mongoCall(() => projects.findOne({ key: project.key }));
      if (existing) return existing;
      if (await insertIfAbsent(projects, project)) return project;
      const winner = await mongoCall(() => projects.findOne({ key: project.key }));
      if (!winner) throw unavailable('project not readable yet');
      return winner;
    },

    getProject: (projectId: string) => mongoCall(() => projects.findOne({ _id: projectId })),

    projectsByIds: (ownerId: string, projectIds: string[]) =>
      mongoCall(() => projects.find({ _id: { $in: projectIds }, owner_id: ownerId }).toArray()),

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
      const now = new Date();
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
              updated_at: now,
            },
          },
        ),
      );
    },

    async setSandboxStatus(threadId: string, status: SandboxStatus, at: Date): Promise<void> {
      await mongoCall(() =>
        threads.updateOne(
          { _id: threadId, $or: [{ sandbox_status_at: null }, { sandbox_status_at: { $lte: at } }] },
          { $set: { sandbox_status: status, sandbox_status_at: at, updated_at: new Date() } },
        ),
      );
    },

    async setCandidateStats(threadId: string, projectRepositoryId: string, stats: CandidateStats): Promise<void> {
      const field = `candidate_stats.${projectRepositoryId}`;
      await mongoCall(() =>
        threads.updateOne(
          { _id: threadId, $or: [{ [field]: { $exists: false } }, { [`${field}.at`]: { $lte: stats.at } }] },
          { $set: { [field]: stats, updated_at: new Date() } },
        ),
      );
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
