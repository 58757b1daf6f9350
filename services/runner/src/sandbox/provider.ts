import type { RunJob, SandboxStatus } from '@threadwork/contracts';
import type { HarnessSession, SessionOptions } from '../harness/harness.js';
import type { HarnessHost } from '../harness/host.js';
import type { SandboxClaim } from './take.js';
import type { DiskUsage } from './disk.js';

export type { DiskUsage } from './disk.js';
export { DiskMeasureError } from './disk.js';

export type { SandboxClaim } from './take.js';
export { SandboxTakenError } from './take.js';

// A sandbox belongs to a thread and outlives its runs (DESIGN.md section 7): the workspace with one
// clone per project repository, the harness's own state, and the environment the harness runs in.
// `local` keeps it in a folder on the runner's disk; `kubernetes` keeps it in a pod's volume, with the
// runner's git directories and a copy of each workspace on the runner's disk.

export interface SandboxRepo {
  project_repository_id: string;
  repository_id: number;
  full_name: string;
  /** The workspace: the agent's, `.git` included. */
  dir: string;
  /** The runner's git directory for the workspace, outside it: the only one the runner uses. */
  gitDir: string;
  /** The repository's canonical URL, from the job: the only remote the runner talks to. */
  clone_url: string;
  /** The thread branch's revision on the remote when the run began (null: it had none); pushes lease on it. */
  start_revision: string | null;
  base_branch: string;
  /** `threadwork/<thread id>`: every run of the thread commits here. */
  branch: string;
  /** The base revision the thread branch was cut from (used when the base branch cannot be read). */
  recorded_base: string;
}

export interface Sandbox {
  id: string;
  threadId: string;
  /** Root of the sandbox. */
  dir: string;
  /** The agent's working directory: the repository itself when there is one, else the root. */
  cwd: string;
  /** The harness's own state (CODEX_HOME): sessions live here, which is what makes a resume work. */
  harnessHome: string;
  /**
   * What a jail around the harness shows of the host, at the same paths: read-write the workspaces,
   * the harness home and the agent's HOME; read-only the objects of the runner's git directories
   * (the agent's repositories borrow them). Nothing else of the sandbox — its state, the runner's
   * git directories — is in it.
   */
  mounts: { writable: string[]; readable: string[] };
  /**
   * The sandbox's own unprivileged uid (gid the same), which its jail runs as outside and which
   * owns what the agent may write; null where jails run as the runner's own user (uids.ts).
   */
  owner: number | null;
  /** The harness's whole environment: nothing of the runner's own (no NATS, Mongo or service secrets). */
  env: Record<string, string>;
  repos: SandboxRepo[];
  /** The harness session stored with the sandbox by an earlier run or attempt, if any. */
  sessionId: string | null;
  /** The harness that session is of. */
  sessionHarness: string | null;
  /**
   * The run attempt's hold on the sandbox: `check()` throws SandboxTakenError once a newer attempt
   * has taken it, and every change the runner makes to the sandbox is preceded by one.
   */
  take: SandboxFence;
  /** Where the sandbox's harness runs when not on this machine (a pod's, over exec); absent: the local host. */
  host?: HarnessHost;
  /**
   * Where the agent's workspace is not the runner's `dir` (a pod): brings the agent's work tree of
   * `repo` into `dir` before the runner commits it, so the commit holds exactly what the agent left.
   * Throws, leaving `dir` as it was, when what the sandbox sends is refused (too large, not a tree
   * on the thread branch). Absent where the agent works in `dir` itself.
   */
  collect?(repo: SandboxRepo): Promise<void>;
  /**
   * After the runner committed `repo`: makes the agent's repository show the commit (the thread
   * branch where it now is, a clean status). Absent where the commit does that itself (candidate.ts).
   */
  publish?(repo: SandboxRepo): Promise<void>;
  /**
   * After the turn, with nothing of the agent running: the commit (candidate.ts) made the agent's
   * repository of `repo` anew, and the next run may take it as it is if no turn comes between.
   * Absent where the agent's repository is not the runner's to make (a pod).
   */
  agentRepoAtRest?(repo: SandboxRepo): Promise<void>;
  /**
   * The harness already started in the sandbox, when it was a spare made ahead (warm.ts) and this
   * run's thread adopted it: the session pool takes it as the thread's live session.
   */
  warm?: WarmHarness;
}

/** A harness process started ahead, in a spare sandbox, before any thread had it. */
export interface WarmHarness {
  harness: string;
  session: HarnessSession;
}

/**
 * A sandbox made ahead of any thread (local.ts `makeSpare`): its repositories cloned from the
 * runner's mirrors at their bases, nothing of any run's in it.
 */
export interface SpareSandbox {
  /** Its folder under SANDBOX_ROOT, which stays its folder when a thread adopts it. */
  folder: string;
  dir: string;
  /** The base revision each repository was cloned at, by project repository id. */
  bases: ReadonlyMap<string, string>;
  /**
   * The agent's repository of each (by project repository id), made aside in the runner's place on
   * the spare's own branch, for the adopting thread to rename and move in (agent-repo.ts).
   */
  agentRepos: ReadonlyMap<string, string>;
  /** What a harness needs to start in it. */
  session: Omit<SessionOptions, 'model' | 'resumeSessionId' | 'host'>;
}

/** Spare sandboxes with their harness started, for new threads to adopt (flows/warm.ts). */
export interface SpareSource {
  /**
   * A spare made for the repositories (at their bases) and harness of `job`, now the caller's alone;
   * null: none. One being made is waited for.
   */
  take(job: RunJob): Promise<{ spare: SpareSandbox; warm: WarmHarness } | null>;
  /** A taken spare that was not adopted: its harness is stopped and its folder removed. */
  discard(taken: { spare: SpareSandbox; warm: WarmHarness }): Promise<void>;
}

export interface SandboxFence {
  check(): void;
  readonly current: boolean;
}

/** A harness session as the sandbox keeps it: its id, and which harness it is of. */
export interface StoredSession {
  harness: string;
  id: string;
}

export interface SandboxProvider {
  readonly kind: string;
  /**
   * Makes the thread's sandbox ready for a run: clones the repositories on first use (the thread
   * branch from the requested base), refreshes them later (fetch, keeping the branch). Publishes
   * `initializing` then `ready`, or `failed` with the reason before it throws. Takes the sandbox
   * for the claim first: throws SandboxTakenError, having changed nothing of a newer attempt's,
   * when the claim no longer holds its run or a newer attempt took the sandbox meanwhile.
   */
  prepare(job: RunJob, claim: SandboxClaim): Promise<Sandbox>;
  /** Whether an earlier attempt left the thread's sandbox on this runner, whole. */
  exists(threadId: string): Promise<boolean>;
  /**
   * Stores the harness session with the sandbox, so a later process (or runner) can resume it,
   * and the process now serving it (`harnessPid`), so a later runner can stop that process.
   */
  rememberSession(sandbox: Sandbox, session: StoredSession | null, harnessPid?: number): Promise<void>;
  /**
   * Stops the harness process recorded with the sandbox if it still runs; true if there was one.
   * A runner calls it before it starts a process of its own for the sandbox: one still running
   * belongs to another runner (idle after an earlier run, or the process of an earlier attempt
   * whose runner was lost — frozen or cut off rather than dead). It would hold the session (Codex
   * lets one process at a time write a conversation, so a resume would fail) and could go on
   * acting in a workspace that is now another run's.
   */
  stopHarness(sandbox: Sandbox): Promise<boolean>;
  /**
   * Bytes and inodes the sandbox takes on disk now, with what the processes of its jail (below
   * `jailPid`, frozen while it is measured) hold of it unlinked. Throws DiskMeasureError when it
   * cannot be measured whole, which is to be taken as past its bound (sandbox/disk.ts).
   */
  diskUsage(sandbox: Sandbox, jailPid?: number): Promise<DiskUsage>;
  /**
   * Marks the sandbox as grown past its bound: the next run rebuilds its workspaces (from the
   * thread branch as last pushed) and empties the agent's HOME; the harness's session is kept.
   */
  outgrown(sandbox: Sandbox): Promise<void>;
  /**
   * Frees an outgrown sandbox's space now, once nothing of its jail runs (the disk is shared with
   * every other sandbox, and the thread's next run may never come): its workspaces, git directories
   * and the agent's HOME go; the harness's home too when it alone is still past `max` or cannot be
   * measured (the conversation is then lost, and the next run starts a new one).
   */
  freeOutgrown(sandbox: Sandbox, max: DiskUsage): Promise<void>;
  /** The sandbox's last published status on this runner. */
  status(threadId: string): SandboxStatus | null;
  /** Marks the sandbox reclaimed after idling (its workspace stays, for the next run to continue in). */
  stop(threadId: string): Promise<void>;
}

/**
 * Publishes a sandbox status change (DOMAIN `sandboxStatus`): for the run `claim` holds while it
 * prepares the sandbox (attested under that claim), or for no run (`null`: stopped after idling).
 * Resolves whether it was published (one that could not be is logged, and the next corrects it).
 */
export type SandboxStatusPublisher = (
  threadId: string,
  sandboxId: string | null,
  status: SandboxStatus,
  reason: string | null,
  claim: SandboxClaim | null,
) => Promise<boolean>;

export class SandboxError extends Error {
  override name = 'SandboxError';
}

/** The run a caller holds, by its claim: what repohost hands a token for. */
export interface RunHold {
  runId: string;
  claimId: string;
}

/** A short-lived token for git over HTTPS to one repository of the run held; null when none is needed. */
export type RepositoryCredentials = (hold: RunHold, repositoryId: number, url: string) => Promise<string | null>;
