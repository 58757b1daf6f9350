import type { EventDef, EventInput, RunError, RunJob, RunStatus } from '@threadwork/contracts';
import type { JetStreamClient, Logger, NatsConnection } from '@threadwork/platform';
import { publishAttested } from '../clients/domain-events.js';
import { EventSink } from '../clients/run-events.js';
import type { AttemptRef } from '../clients/runs.js';
import type { RunnerConfig } from '../config.js';
import type { DiskOverrun, StopReason } from '../domain/outcome.js';
import type { HarnessSession } from '../harness/harness.js';
import type { Isolation } from '../sandbox/isolation.js';
import type { RepositoryCredentials, Sandbox, SandboxProvider } from '../sandbox/provider.js';
import type { SessionPool } from './sessions.js';
import type { WarmPool } from './warm.js';

// What every step of working a run shares: the runner's dependencies, the attempt it holds, and
// where the run and its turn stand. The steps (flows/claim.ts, steers.ts, questions.ts, …) are
// functions that take this one object; none of them calls another back through it.

export interface RunDeps {
  nc: NatsConnection;
  js: JetStreamClient;
  config: RunnerConfig;
  logger: Logger;
  runnerId: string;
  sandboxes: SandboxProvider;
  sessions: SessionPool;
  /** Spare sandboxes for new threads (`local` provider only): told of each run served. */
  warm?: WarmPool | null;
  /** Harnesses whose model endpoint is not configured, with the error their runs fail with at once. */
  unconfigured: ReadonlyMap<string, RunError>;
  /** Credentials to push the thread branch (null: none needed, e.g. a local repository). */
  credentials: RepositoryCredentials;
  /** What contains the agent, said in each attempt's `sandbox.ready` event. */
  isolation: Isolation;
}

/** What to do with the job message: done with it, hand it back (now or later), or leave it to whoever fenced us out. */
export type JobResult = { kind: 'ack' } | { kind: 'nak'; delayMs: number } | { kind: 'abandon' };

/** A run being worked; `stop('shutdown')` hands it back when the runner stops. */
export interface LiveRun {
  runId: string;
  stop(reason: StopReason): void;
}

/** Grace between interrupting a turn and killing its process. */
const INTERRUPT_GRACE_MS = 10_000;

export class RunState implements LiveRun {
  readonly runId: string;
  readonly sink: EventSink;
  status: RunStatus;
  stopReason: StopReason | null = null;
  session: HarnessSession | null = null;
  sandbox: Sandbox | null = null;
  turnStarted = false;
  turnEnded = false;
  interrupting = false;
  /** Steers signalled and not yet taken, by control id; their text is read from the threads service. */
  readonly pendingSteers: string[] = [];
  /** Every control id signalled to this attempt: each is taken at most once (a replayed signal is dropped). */
  readonly steersSignalled = new Set<string>();
  steering = false;
  /** The check of a cancel signal under way; `cancelRecheck` asks for one more after it. */
  cancelCheck: Promise<void> | null = null;
  cancelRecheck = false;
  /** Woken by an `interaction` signal (or a stop) while a question waits for its answer. */
  wakeQuestion: (() => void) | null = null;
  killTimer: NodeJS.Timeout | undefined;
  measuringDisk = false;
  /** Which bound on disk the sandbox went past, once it did (DISK_FULL_ERROR says so). */
  diskOverrun: DiskOverrun | null = null;
  /** A newer attempt (another runner) holds the run: nothing this one reports counts any more. */
  fenced = false;
  /** Called at the turn's first event: the spare sandboxes held back for this run may be made (warm.ts). */
  arrived: () => void = () => {};

  constructor(
    readonly deps: RunDeps,
    readonly job: RunJob,
    readonly attempt: number,
    readonly claimId: string,
    status: RunStatus,
    readonly log: Logger,
  ) {
    this.runId = job.run_id;
    this.status = status;
    this.sink = new EventSink(deps.nc, job.run_id, attempt, claimId, log, (reason) => {
      log.warn({ reason }, 'run events refused; this attempt no longer holds the run');
      this.stop('fenced');
    });
  }

  stop(reason: StopReason): void {
    if (this.stopReason) return;
    this.stopReason = reason;
    this.wakeQuestion?.();
    if (!this.session || this.turnEnded) return;
    const session = this.session;
    if (this.turnStarted) this.interruptTurn();
    // Begun or not, the turn must be over within the grace: a harness that never gets its turn
    // under way (a model call that hangs before it) is stopped as one that ignores the interrupt.
    if (this.killTimer) clearTimeout(this.killTimer);
    this.killTimer = setTimeout(() => {
      this.log.warn({ reason }, 'turn did not stop after the interrupt; killing the harness');
      void this.deps.sessions.discard(this.job.thread_id, session);
    }, INTERRUPT_GRACE_MS);
  }

  /**
   * Asks the harness to end its turn, one request at a time. Called again at every later sign of
   * life of the turn: a harness may take an interrupt that arrives just as its turn begins as
   * nothing to interrupt (Codex answers it and goes on), and must not carry on unnoticed.
   */
  interruptTurn(): void {
    const session = this.session;
    if (!session || this.interrupting || this.turnEnded) return;
    this.interrupting = true;
    void session.interrupt().finally(() => {
      this.interrupting = false;
    });
  }

  /** Read through a call: `status` changes across awaits, which narrowing does not see. */
  statusNow(): RunStatus {
    return this.status;
  }

  /** Known to be fenced out: a move or an append was refused, or a poll found a newer attempt. */
  get isFenced(): boolean {
    return this.fenced || this.stopReason === 'fenced';
  }

  get isTerminal(): boolean {
    return this.status === 'completed' || this.status === 'failed' || this.status === 'cancelled';
  }

  attemptRef(): AttemptRef {
    return { run_id: this.job.run_id, attempt: this.attempt, claim_id: this.claimId };
  }

  /** A DOMAIN event about this run, attested under this attempt's claim before it goes out. */
  publish<E extends EventDef>(def: E, event: EventInput<E>, msgId: string): Promise<boolean> {
    return publishAttested(this.deps.nc, this.deps.js, this.log, this.attemptRef(), def, event, msgId);
  }
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
