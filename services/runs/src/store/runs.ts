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
import { ensureIndexes, type Collection, type Db } from '@threadwork/platform';

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
}

/** A runner's claim on one attempt of a run: `_id` is `${run_id}:${attempt}`, first insert wins. */
export interface AttemptDoc {
  _id: string;
  run_id: string;
  attempt: number;
  runner_id: string;
  /** SHA-256 (hex) of the runner's claim id: its retries find the attempt, its holder proves itself. */
  claim_sha256?: string;
  at: Date;
  /**
   * When the holder was last heard from (its claim, moves, appends, polls), written at most every
   * quarter lease; absent: `at`. A claim of a run whose holder's lease has not run out is refused.
   * The only field of an attempt that changes: a lost write of it only shortens the lease.
   */
  heard_at?: Date;
  /** Set when the holder handed the run back: its lease is over, whatever `heard_at` says. */
  released_at?: Date;
}

/**
 * A cancellation request, kept apart from the run: FerretDB writes whole documents, so a flag on
 * the run could be lost to a concurrent move; an insert cannot.
 */
export interface CancelDoc {
  _id: string;
  at: Date;
}

/**
 * A DOMAIN event the holder of a run said it publishes about the run (runs.attest): `_id` is
 * `${run_id}:${digest}`, written once. Services ask for it before acting on a runner's event.
 */
export interface AttestationDoc {
  _id: string;
  run_id: string;
  attempt: number;
  subject: string;
  at: Date;
}

/** Written last by an admission: its queued event, job and DOMAIN event are all published. */
export interface AdmissionDoc {
  _id: string;
  at: Date;
}

export interface RunStore {
  runs: Collection<RunDoc>;
  slots: Collection<SlotDoc>;
  terminals: Collection<TerminalDoc>;
  attempts: Collection<AttemptDoc>;
  cancels: Collection<CancelDoc>;
  admissions: Collection<AdmissionDoc>;
  attestations: Collection<AttestationDoc>;
  /**
   * The SHA-256 of the claim id that made attempt `attempt` of a run; null when no runner's claim
   * made it (none yet, or the unclaimed-run sweep took it). Asked on every move and append.
   */
  claimOf(runId: string, attempt: number): Promise<string | null>;
  /**
   * Notes that the holder of attempt `attempt` of a run was heard from `at`, renewing its lease. The
   * write is spared when this replica wrote it less than `everyMs` before: a busy run's appends and
   * polls cost no write each.
   */
  hear(runId: string, attempt: number, at: Date, everyMs: number): Promise<void>;
  ensureIndexes(): Promise<void>;
}

/**
 * How many attempts' claim hashes a replica remembers. An attempt is inserted once and never
 * changed, so what is remembered cannot go stale; this only spares the fence of a busy run's
 * appends a look-up each (the live runs of a replica fit many times over).
 */
const CLAIMS_REMEMBERED = 10_000;

export function createRunStore(db: Db): RunStore {
  const runs = db.collection<RunDoc>('runs');
  const slots = db.collection<SlotDoc>('thread_slots');
  const terminals = db.collection<TerminalDoc>('run_terminals');
  const attempts = db.collection<AttemptDoc>('run_attempts');
  const cancels = db.collection<CancelDoc>('run_cancels');
  const admissions = db.collection<AdmissionDoc>('run_admissions');
  // Read and written by `_id` (run id and digest) only: the default index is all it needs.
  const attestations = db.collection<AttestationDoc>('run_attestations');

  const claims = new Map<string, string>();
  const heard = new Map<string, number>();
  return {
    runs,
    slots,
    terminals,
    attempts,
    cancels,
    admissions,
    attestations,
    async claimOf(runId, attempt) {
      const id = `${runId}:${attempt}`;
      const known = claims.get(id);
      if (known !== undefined) return known;
      const doc = await attempts.findOne({ _id: id });
      if (!doc?.claim_sha256) return null;
      if (claims.size >= CLAIMS_REMEMBERED) claims.delete(claims.keys().next().value as string);
      claims.set(id, doc.claim_sha256);
      return doc.claim_sha256;
    },
    async hear(runId, attempt, at, everyMs) {
      const id = `${runId}:${attempt}`;
      const last = heard.get(id);
      if (last !== undefined && at.getTime() - last < everyMs) return;
      // Not a decision, only a time: two replicas writing it at once both write a fresh one.
      await attempts.updateOne({ _id: id }, { $set: { heard_at: at } });
      heard.delete(id);
      if (heard.size >= CLAIMS_REMEMBERED) heard.delete(heard.keys().next().value as string);
      heard.set(id, at.getTime());
    },
    async ensureIndexes() {
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
      ]);
      await ensureIndexes(attempts, [
        {
          key: { run_id: 1, attempt: -1 },
          options: { name: 'run_attempt' },
          serves: 'claim: the highest attempt claimed so far of a run',
        },
      ]);
    },
  };
}

const iso = (d: Date) => d.toISOString();

/** The latest slot of a thread: who holds it, or held it last. */
export function latestSlot(slots: Collection<SlotDoc>, threadId: string): Promise<SlotDoc | null> {
  return slots.find({ thread_id: threadId }).sort({ generation: -1 }).limit(1).next();
}

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
