import type {
  CollaborationMode,
  ControlKind,
  ControlStatus,
  MessageRole,
  ProjectRepository,
  RunRepository,
  SandboxStatus,
  TextPart,
} from '@threadwork/contracts';

// The documents of this service's collections. Timestamps are Dates in MongoDB and ISO strings
// only in responses.

export interface ProjectRecord {
  _id: string;
  owner_id: string;
  /** `projectKey(owner, repository ids)`: unique, so concurrent creates converge on one project. */
  key: string;
  name: string;
  /** Primary first. */
  repositories: ProjectRepository[];
  created_at: Date;
}

export interface CandidateStats {
  additions: number;
  deletions: number;
  /** When the candidate was produced, so a late, older one does not replace it. */
  at: Date;
}

export interface ThreadRecord {
  _id: string;
  owner_id: string;
  project_id: string;
  name: string | null;
  /** The first prompt (the work list shows it). */
  prompt: string;
  /**
   * As requested until the first run is recorded, then as runs chose them (runs applies the
   * defaults); later runs of the thread are admitted with these.
   */
  harness: string | null;
  model: string | null;
  reasoning_effort: string | null;
  collaboration_mode: CollaborationMode | null;
  /** Base branch of the primary repository. */
  branch: string;
  /** URL of the primary repository. */
  repohost_url: string;
  /** What every run of the thread clones, fixed at creation. */
  repositories: RunRepository[];
  /** The run creation admitted; the task vocabulary calls the time before its sandbox is ready `setup`. */
  first_run_id: string;
  /**
   * Null until the first admission is recorded: such a thread is a creation that has not finished
   * (a retry with the same client_request_id finishes it) and is not shown.
   */
  latest_run_id: string | null;
  /** Creation time of `latest_run_id`, so a late or replayed recording never moves it back. */
  latest_run_created_at: Date | null;
  sandbox_status: SandboxStatus | null;
  /** Time of the sandbox event stored, so an older event delivered late does not win. */
  sandbox_status_at: Date | null;
  /**
   * Lines added and deleted by the latest candidate revision of each project repository
   * (`project_repository_id` → stats); absent until a run has produced one.
   */
  candidate_stats?: Record<string, CandidateStats>;
  created_at: Date;
  updated_at: Date;
}

/** A thread whose first run is recorded: the only kind anyone outside this service sees. */
export type RecordedThread = ThreadRecord & {
  harness: string;
  model: string;
  reasoning_effort: string;
  collaboration_mode: CollaborationMode;
  latest_run_id: string;
  latest_run_created_at: Date;
};

export function isRecorded(thread: ThreadRecord): thread is RecordedThread {
  return (
    thread.latest_run_id !== null &&
    thread.latest_run_created_at !== null &&
    thread.harness !== null &&
    thread.model !== null &&
    thread.reasoning_effort !== null &&
    thread.collaboration_mode !== null
  );
}

export interface MessageRecord {
  /** `${thread_id}/${message_id}`: message ids may come from callers and are unique per thread only. */
  _id: string;
  thread_id: string;
  message_id: string;
  role: MessageRole;
  parts: TextPart[];
  /** The run a user message starts, or the run an assistant reply belongs to. */
  run_id: string | null;
  /**
   * A user message is stored hidden before its run is admitted and shown once the admission is
   * recorded (or once any status event of its run arrives, should the sender have crashed in
   * between). One whose send lost the thread to another run stays hidden and is never listed; it
   * is not deleted, since a twin of that send may be showing it (see admitWithMessage).
   */
  visible: boolean;
  created_at: Date;
}

export interface ControlRecord {
  _id: string;
  owner_id: string;
  thread_id: string;
  kind: ControlKind;
  status: ControlStatus;
  prompt: string;
  prompt_parts: TextPart[];
  collaboration_mode: CollaborationMode;
  target_run_id: string | null;
  created_run_id: string | null;
  /** The message and run ids the control's own run gets if it admits one, chosen up front so retries agree. */
  message_id: string;
  run_id: string;
  created_at: Date;
  applied_at: Date | null;
}

/** One `client_request_id` of one owner for one operation, with the ids its first attempt chose. */
export interface RequestRecord<Ids extends Record<string, string> = Record<string, string>> {
  _id: string;
  owner_id: string;
  body_hash: string;
  ids: Ids;
  created_at: Date;
}

/**
 * A thread whose queue is waiting for room under MAX_LIVE_RUNS_PER_USER: its oldest pending control
 * was refused because the owner was at the limit. When one of the owner's runs ends, the waiting
 * threads are drained oldest first. Kept apart from the thread (`_id` is the thread id): FerretDB
 * writes whole documents, so a flag on the thread could be lost to a concurrent status write.
 */
export interface WaitRecord {
  _id: string;
  owner_id: string;
  /** When the thread first had to wait: the order waiting threads get room in. */
  since: Date;
  /** When it was last refused; a wait is cleared only as last seen, so a fresh refusal keeps it. */
  at: Date;
}
