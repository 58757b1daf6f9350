import type { CollaborationMode, Question, RunError, RunEventChunk, RunUsage } from '@threadwork/contracts';
import type { HarnessHost } from './host.js';
import type { Sweep } from './processes.js';

// What the runner needs of an agent harness, in the neutral vocabulary of the run events: start a
// session in a sandbox (or resume one), run a turn, steer it, interrupt it, answer its questions.
// Codex (harness/codex) and Claude Code (harness/claude) are the adapters.

export interface TurnInput {
  prompt: string;
  model: string;
  reasoningEffort: string;
  collaborationMode: CollaborationMode;
  /** Passed along to the model endpoint as request metadata (the demo model reads the run id there). */
  metadata: Record<string, string>;
}

/** Answers keyed by question id: the option labels chosen or the text typed. Empty: the user declined. */
export type QuestionAnswers = Record<string, string[]>;

/** The user's answer to a plan: approved, or rejected (with what they said about it, if anything). */
export type PlanDecision = { approved: true } | { approved: false; comment: string | null };

export interface TurnListener {
  /** The turn has begun: from now on it can be steered and interrupted. */
  started(): void;
  /** A neutral event of the turn, in the order the harness produced it. */
  chunk(chunk: RunEventChunk): void;
  /** The harness asks the user. `key` is the harness's id of the question, stable across retries. */
  question(key: string, questions: Question[]): Promise<QuestionAnswers>;
  /** The harness asks the user to approve its plan (plan mode's way out). `key` as for questions. */
  planApproval(key: string, plan: string): Promise<PlanDecision>;
}

export interface TurnOutcome {
  status: 'completed' | 'interrupted' | 'failed';
  /** Why a failed turn failed. */
  error: RunError | null;
  /** The agent's last message of the turn: its reply. */
  reply: { itemId: string; text: string } | null;
  /** Tokens this turn used. */
  usage: RunUsage;
}

export interface HarnessSession {
  /** The harness's own id of the conversation, stored with the sandbox so a later process can resume it. */
  readonly sessionId: string;
  /** Process id of the harness, while it runs. */
  readonly pid: number | undefined;
  readonly alive: boolean;
  /** Resolves when the harness process has exited, however it ended. */
  readonly exited: Promise<void>;
  /**
   * Runs one turn to its end. The process dying mid-turn is an outcome too (`failed`,
   * `harness_crashed`), never a hang.
   */
  runTurn(input: TurnInput, listener: TurnListener): Promise<TurnOutcome>;
  /** Adds input to the turn in progress; false when there is none to steer (it ended or never began). */
  steer(text: string): Promise<boolean>;
  /** Asks the turn in progress to stop; its `runTurn` then resolves `interrupted`. */
  interrupt(): Promise<void>;
  /** Stops the process: asks it to exit, then kills it by pid. */
  stop(): Promise<void>;
  /**
   * Kills every process the agent left running (background jobs, `setsid` daemons, the harness's
   * idle shells), keeping the harness itself warm for the thread's next run; answers what it killed
   * and whether the sweep settled. One that did not may have missed a process (one that forks and
   * exits faster than it looks): the session must then be stopped whole, jail and all.
   */
  stopLeftovers(): Promise<Sweep>;
}

export interface SessionOptions {
  /** Working directory of the agent. */
  cwd: string;
  /** The harness's own state directory (sessions, rollouts); kept with the sandbox. */
  home: string;
  /** Environment of the harness process, already scrubbed. */
  env: Record<string, string>;
  model: string;
  /** Resume this conversation instead of starting one. */
  resumeSessionId: string | null;
  /** What the jail shows of the host, when the harness runs in one. */
  mounts: { writable: readonly string[]; readable: readonly string[] };
  /** The sandbox's own uid (and gid), which its jail runs as outside; null: the runner's own. */
  owner: number | null;
  /** Where the harness process runs: this machine (localHost) or the sandbox's pod. */
  host: HarnessHost;
}

export class ResumeFailedError extends Error {
  override name = 'ResumeFailedError';

  constructor(
    message: string,
    /**
     * The harness holds nothing of the session: it was lost before anything of it was recorded
     * (a runner killed as its first turn began). Nothing of the conversation is lost by starting anew.
     */
    readonly neverRecorded = false,
  ) {
    super(message);
  }
}

export interface Harness {
  readonly name: string;
  /** Name of the environment variable the harness reads the model key from (the only secret it gets). */
  readonly modelKeyEnv: string;
  /** Starts a harness process; with `resumeSessionId`, resumes that conversation or throws ResumeFailedError. */
  start(options: SessionOptions): Promise<HarnessSession>;
}
