import type {
  CollaborationMode,
  Run,
  RunError,
  RunJob,
  RunRepository,
  RunStatus,
  RunUsage,
  TerminalRunStatus,
} from '@threadwork/contracts';
import { ensureIndexes, isDuplicateKeyError, mongoCall, type Collection, type Db } from '@threadwork/platform';
import { createAttemptStore, type AttemptStore } from './attempts.js';

/**
 * A run, with what its job needs so a claim can rebuild the job. `transitions` counts the moves
 * made on it (it keys the status events of moves that can repeat within one attempt);
 * `previous_status` and `status_key` say what the last move's `run.status` event is, so a retry
 * that finds the move already made can append that event again (deduplicated by its key).
 */
export interface RunDoc {
  _id: string;
  owner_id: string;
  thread_id: string;
  project_id: string;
  message_id: string;
  admission_key: string;
  prompt: string;
  repositories: RunRepository[];
  status: RunStatus;
  previous_status: RunStatus | null;
  status_key: string;
  attempt: number;
  transitions: number;
  harness: string;
  model: string;
  reasoning_effort: string;
  collaboration_mode: CollaborationMode;
  runner_id: string | null;
  sandbox_id: string | null;
  error: RunError | null;
  usage: RunUsage | null;
  created_at: Date;
  updated_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
  terminal: boolean;
  /** Trace id of the admitting request; null when telemetry is off (or for runs admitted before). */
  trace_id?: string | null;
  /**
   * When the run's event log was archived to MongoDB and purged from its stream (flows/archive.ts);
   * absent before. Lets the archive sweep skip the run and a page go to the archive directly; the
   * archive's own record decides where events are read (this flag, on a document others write
   * whole, may be lost and set again).
   */
  events_archived_at?: Date | null;
  /**
   * After a failed attempt to archive the run's log: not before this time again, so that runs
   * whose archiving keeps failing do not fill every pass of the sweep (which takes the oldest).
   */
  events_archive_retry_at?: Date | null;
}

/**
 * The thread's runs in admission order: generation n + 1 may be taken only once the run of
 * generation n has ended, and whoever inserts `_id: <thread>:<n + 1>` first holds the thread.
 * Slots are never deleted or updated: on FerretDB a conditional delete (or update) is a read
 * followed by a write by `_id`, so "release the slot if it still holds run X" could delete the
 * slot another admission had just taken. An insert is the only decision that holds there.
 */
export interface SlotDoc {
  _id: string;
  thread_id: string;
  generation: number;
  run_id: string;
  /** So a retried admission recognises the slot it took before it crashed. */
  admission_key: string;
  created_at: Date;
}

/**
 * The terminal outcome of a run, decided by inserting `_id: run_id` (first insert wins). It holds
 * everything the follow-up writes need, so anyone who finds it can finish them.
 */
export interface TerminalDoc {
  _id: string;
  status: TerminalRunStatus;
  previous: RunStatus;
  error: RunError | null;
  usage: RunUsage | null;
  attempt: number;
  at: Date;
  /** Set once the terminal event is in the log, so a late completer does not append it again. */
  event_sequence: number | null;
  /**
   * False until the run's terminal DOMAIN event is published, so a retry that finds the run ended
   * publishes it still (absent on runs that ended before this was kept: those were announced).
   */
  announced?: boolean;
}

/**
 * A cancellation request, kept apart from the run: FerretDB writes whole documents, so a flag on
 * the run could be lost to a concurrent move; an insert cannot.
 */
export interface CancelDoc {
  _id: string;
  at: Date;
}

/** Written last by an admission: its queued event, job and DOMAIN event are all published. */
export interface AdmissionDoc {
  _id: string;
  at: Date;
}

export interface RunStore extends AttemptStore {
  // The collections are open to tests, which set up states no flow makes; flows read and write
  // through the functions below, which turn a database outage into `unavailable`.
  runs: Collection<RunDoc>;
  slots: Collection<SlotDoc>;
  terminals: Collection<TerminalDoc>;
  cancels: Collection<CancelDoc>;
  admissions: Collection<AdmissionDoc>;
  run(runId: string): Promise<RunDoc | null>;
  runOfAdmission(admissionKey: string): Promise<RunDoc | null>;
  /** Writes a new run; a duplicate-key error says its id or admission key is taken. */
  insertRun(doc: RunDoc): Promise<void>;
  /** The owner's runs among `runIds`, in no particular order. */
  ownedRuns(ownerId: string, runIds: readonly string[]): Promise<RunDoc[]>;
  /** Up to `limit` ids of the owner's runs whose document is not terminal. */
  liveRunIds(ownerId: string, limit: number): Promise<string[]>;
  /** The oldest runs still queued that were admitted before `cutoff`. */
  queuedBefore(cutoff: Date, limit: number): Promise<RunDoc[]>;
  /** The runs that ended before `cutoff` whose event log is not archived yet, oldest first. */
  /** Ended runs not archived yet that ended before `cutoff`, oldest first, but those to retry after `now`. */
  runsToArchive(cutoff: Date, limit: number, now: Date): Promise<RunDoc[]>;
  /** Sets `fields` if the run is still live at its attempt and status; the run after, or null. */
  updateIfUnmoved(run: RunDoc, fields: Partial<RunDoc>): Promise<RunDoc | null>;
  /** Moves a live run below `attempt` to it; the run after, or null when it was not below. */
  takeOver(runId: string, attempt: number, runnerId: string, at: Date): Promise<RunDoc | null>;
  setRun(runId: string, fields: Partial<RunDoc>): Promise<void>;
  /** The latest slot of a thread: who holds it, or held it last. */
  latestSlot(threadId: string): Promise<SlotDoc | null>;
  /** Takes a slot; a duplicate-key error says another admission took it first. */
  insertSlot(doc: SlotDoc): Promise<void>;
  terminal(runId: string): Promise<TerminalDoc | null>;
  /** The ids among `runIds` whose terminal outcome is decided. */
  decidedAmong(runIds: readonly string[]): Promise<string[]>;
  /** Decides a run's terminal outcome; a duplicate-key error says it was decided before. */
  decideTerminal(doc: TerminalDoc): Promise<void>;
  noteTerminalEvent(runId: string, sequence: number | null): Promise<void>;
  noteTerminalAnnounced(runId: string): Promise<void>;
  /** Records a cancel request; asking again adds nothing. */
  requestCancel(runId: string, at: Date): Promise<void>;
  cancelRequested(runId: string): Promise<boolean>;
  admitted(runId: string): Promise<boolean>;
  /** Records that an admission published all it had to; recording it again adds nothing. */
  markAdmitted(runId: string, at: Date): Promise<void>;
  ensureIndexes(): Promise<void>;
}

/** An insert that may already have been made: the first one is the one that counts. */
async function insertOnce(insert: () => Promise<unknown>): Promise<void> {
  try {
    await mongoCall(insert);
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
  }
}

export function createRunStore(db: Db): RunStore {
  const runs = db.collection<RunDoc>('runs');
  const slots = db.collection<SlotDoc>('thread_slots');
  const terminals = db.collection<TerminalDoc>('run_terminals');
  const cancels = db.collection<CancelDoc>('run_cancels');
  const admissions = db.collection<AdmissionDoc>('run_admissions');
  const attempts = createAttemptStore(db);

  return {
    ...attempts,
    runs,
    slots,
    terminals,
    cancels,
    admissions,
    run: (runId) => mongoCall(() => runs.findOne({ _id: runId })),
    runOfAdmission: (admissionKey) => mongoCall(() => runs.findOne({ admission_key: admissionKey })),
    async insertRun(doc) {
      await mongoCall(() => runs.insertOne(doc));
    },
    ownedRuns: (ownerId, runIds) =>
      mongoCall(() => runs.find({ _id: { $in: [...new Set(runIds)] }, owner_id: ownerId }).toArray()),
    async liveRunIds(ownerId, limit) {
      const found = await mongoCall(() =>
        runs
          .find({ owner_id: ownerId, terminal: false }, { projection: { _id: 1 } })
          .limit(limit)
          .toArray(),
      );
      return found.map((run) => run._id);
    },
    queuedBefore: (cutoff, limit) =>
      mongoCall(() =>
        runs
          .find({ status: 'queued', created_at: { $lt: cutoff } })
          .sort({ created_at: 1 })
          .limit(limit)
          .toArray(),
      ),
    runsToArchive: (cutoff, limit, now) =>
      mongoCall(() =>
        runs
          .find({
            events_archived_at: null,
            completed_at: { $lt: cutoff },
            $or: [{ events_archive_retry_at: null }, { events_archive_retry_at: { $lte: now } }],
          })
          .sort({ completed_at: 1 })
          .limit(limit)
          .toArray(),
      ),
    updateIfUnmoved: (run, fields) =>
      mongoCall(() =>
        runs.findOneAndUpdate(
          { _id: run._id, attempt: run.attempt, status: run.status, terminal: false },
          { $set: fields },
          { returnDocument: 'after' },
        ),
      ),
    takeOver: (runId, attempt, runnerId, at) =>
      mongoCall(() =>
        runs.findOneAndUpdate(
          { _id: runId, attempt: { $lt: attempt }, terminal: false },
          { $set: { attempt, runner_id: runnerId, updated_at: at } },
          { returnDocument: 'after' },
        ),
      ),
    async setRun(runId, fields) {
      await mongoCall(() => runs.updateOne({ _id: runId }, { $set: fields }));
    },
    latestSlot: (threadId) =>
      mongoCall(() => slots.find({ thread_id: threadId }).sort({ generation: -1 }).limit(1).next()),
    async insertSlot(doc) {
      await mongoCall(() => slots.insertOne(doc));
    },
    terminal: (runId) => mongoCall(() => terminals.findOne({ _id: runId })),
    async decidedAmong(runIds) {
      const found = await mongoCall(() =>
        terminals.find({ _id: { $in: [...runIds] } }, { projection: { _id: 1 } }).toArray(),
      );
      return found.map((doc) => doc._id);
    },
    async decideTerminal(doc) {
      await mongoCall(() => terminals.insertOne(doc));
    },
    async noteTerminalEvent(runId, sequence) {
      await mongoCall(() => terminals.updateOne({ _id: runId }, { $set: { event_sequence: sequence } }));
    },
    async noteTerminalAnnounced(runId) {
      await mongoCall(() => terminals.updateOne({ _id: runId }, { $set: { announced: true } }));
    },
    requestCancel: (runId, at) => insertOnce(() => cancels.insertOne({ _id: runId, at })),
    cancelRequested: async (runId) => (await mongoCall(() => cancels.findOne({ _id: runId }))) !== null,
    admitted: async (runId) => (await mongoCall(() => admissions.findOne({ _id: runId }))) !== null,
    markAdmitted: (runId, at) => insertOnce(() => admissions.insertOne({ _id: runId, at })),
    async ensureIndexes() {
      await attempts.ensureIndexes();
      // run_terminals, run_cancels and run_admissions are read and decided by `_id` only (run id):
      // the default unique `_id` index is all they need; thread_slots are decided by `_id` too.
      await ensureIndexes(slots, [
        {
          key: { thread_id: 1, generation: -1 },
          options: { name: 'thread_generation' },
          serves: 'admit and live run: the latest slot of a thread',
        },
      ]);
      await ensureIndexes(runs, [
        {
          key: { admission_key: 1 },
          options: { name: 'admission_key_unique', unique: true },
          serves: 'admit: find the run of an admission key; one run per admission key',
        },
        {
          key: { status: 1, created_at: 1 },
          options: { name: 'status_created' },
          serves: 'the unclaimed-run sweep: queued runs admitted before a cutoff',
        },
        {
          key: { owner_id: 1, terminal: 1 },
          options: { name: 'owner_terminal' },
          serves: "live count: an owner's runs not yet terminal (the per-user cap on live runs)",
        },
        {
          key: { events_archived_at: 1, completed_at: 1 },
          options: { name: 'archived_completed' },
          serves: 'the archive sweep: ended runs not yet archived, oldest first',
        },
      ]);
    },
  };
}

const iso = (d: Date) => d.toISOString();

export function toRun(doc: RunDoc): Run {
  return {
    id: doc._id,
    thread_id: doc.thread_id,
    project_id: doc.project_id,
    message_id: doc.message_id,
    status: doc.status,
    attempt: doc.attempt,
    harness: doc.harness,
    model: doc.model,
    reasoning_effort: doc.reasoning_effort,
    collaboration_mode: doc.collaboration_mode,
    sandbox_id: doc.sandbox_id,
    error: doc.error,
    usage: doc.usage,
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
    started_at: doc.started_at ? iso(doc.started_at) : null,
    completed_at: doc.completed_at ? iso(doc.completed_at) : null,
    terminal: doc.terminal,
  };
}

export function toJob(doc: RunDoc): RunJob {
  return {
    run_id: doc._id,
    thread_id: doc.thread_id,
    project_id: doc.project_id,
    owner_id: doc.owner_id,
    message_id: doc.message_id,
    prompt: doc.prompt,
    harness: doc.harness,
    model: doc.model,
    reasoning_effort: doc.reasoning_effort,
    collaboration_mode: doc.collaboration_mode,
    repositories: doc.repositories,
  };
}
