import { randomBytes } from 'node:crypto';
import {
  domainEvents,
  rpc,
  RunSignal,
  subjects,
  type CandidateFailedEvent,
  type CandidateProducedEvent,
  type ControlAppliedEvent,
  type MessageCompletedEvent,
  type Question,
  type Run,
  type RunError,
  type RunJob,
  type RunTicket,
  type RunStatus,
  type RunUsage,
  type TerminalRunStatus,
} from '@threadwork/contracts';
import {
  decodeJson,
  isAppError,
  isPlainPublish,
  meter,
  withSpan,
  type Histogram,
  type JetStreamClient,
  type Logger,
  type NatsConnection,
} from '@threadwork/platform';
import type { RunnerConfig } from '../config.js';
import {
  continuesLostTurn,
  decideOutcome,
  harnessAnswers,
  stepsTo,
  DISK_FULL_ERROR,
  type DiskOverrun,
  TIMEOUT_ERROR,
  type Decision,
  type StopReason,
} from '../domain/outcome.js';
import { ResumeFailedError, type HarnessSession, type QuestionAnswers, type TurnOutcome } from '../harness/harness.js';
import { commitAndDiff, runnerRepo } from '../sandbox/candidate.js';
import type { Isolation } from '../sandbox/isolation.js';
import { git, remoteRevisions } from '../sandbox/git.js';
import {
  SandboxError,
  SandboxTakenError,
  type SandboxClaim,
  type RepositoryCredentials,
  type Sandbox,
  type SandboxProvider,
  type SandboxRepo,
  type DiskUsage,
} from '../sandbox/provider.js';
import {
  attemptHolds,
  call,
  publishAttested,
  readAttempt,
  retryAfterMs,
  type AttemptRef,
  type DomainEventDef,
} from './calls.js';
import { EventSink } from './event-sink.js';

let sandboxStartHistogram: Histogram | undefined;
/** Time to make a thread's workspace ready: a first clone, or a fetch into the one kept. */
const sandboxStart = (): Histogram =>
  (sandboxStartHistogram ??= meter().createHistogram('threadwork.sandbox.start.duration', {
    description: 'Time to prepare a sandbox for a run (clone or fetch, thread branch, harness home)',
    unit: 's',
  }));
import type { SessionPool } from './sessions.js';

// One job, start to finish: claim the run, prepare the sandbox, drive the harness through one
// turn while listening for cancel, steer and answers, then commit the workspace, report the
// candidate and the reply, and end the run. Every path out ends the run or hands the job back
// for redelivery; none leaves a run live with nobody working it.

export interface RunDeps {
  nc: NatsConnection;
  js: JetStreamClient;
  config: RunnerConfig;
  logger: Logger;
  runnerId: string;
  sandboxes: SandboxProvider;
  sessions: SessionPool;
  /** Null when no model endpoint is configured (runs then fail fast). */
  modelConfigured: boolean;
  /** Credentials to push the thread branch (null: none needed, e.g. a local repository). */
  credentials: RepositoryCredentials;
  /** What contains the agent, said in each attempt's `sandbox.ready` event. */
  isolation: Isolation;
}

/** What to do with the job message: done with it, hand it back (now or later), or leave it to whoever fenced us out. */
export type JobResult = { kind: 'ack' } | { kind: 'nak'; delayMs: number } | { kind: 'abandon' };

export const MODEL_NOT_CONFIGURED: RunError = {
  code: 'model_not_configured',
  message:
    'Set MODEL_BASE_URL (an OpenAI-compatible Responses endpoint) and MODEL_API_KEY, or start with THREADWORK_DEMO=1',
};

/** Bounds of the delay a job is handed back with while another runner's lease holds its run. */
const MIN_HELD_NAK_MS = 500;
const MAX_HELD_NAK_MS = 60_000;

/** Grace between interrupting a turn and killing its process. */
const INTERRUPT_GRACE_MS = 10_000;

/** A run being worked; `stop('shutdown')` hands it back when the runner stops. */
export interface LiveRun {
  runId: string;
  stop(reason: StopReason): void;
}

export async function executeJob(
  deps: RunDeps,
  job: RunTicket,
  track: (live: LiveRun | null) => void,
): Promise<JobResult> {
  const log = deps.logger.child({ run_id: job.run_id, thread_id: job.thread_id });
  let claim: { run: Run; attempt: number; job: RunJob };
  let claimId: string;
  try {
    // One claim id for this take of the job: retries of the call get the attempt a lost answer
    // carried, and later calls prove with it that this runner holds the run. A secret: never logged.
    claimId = `clm_${randomBytes(16).toString('hex')}`;
    claim = await call(
      deps.nc,
      rpc.runs.claim,
      { run_id: job.run_id, runner_id: deps.runnerId, claim_id: claimId },
      10_000,
    );
  } catch (err) {
    if (isAppError(err) && err.code === 'not_found') {
      log.info({ reason: err.message }, 'job dropped: the run does not exist');
      return { kind: 'ack' };
    }
    if (isAppError(err) && err.code === 'already_settled') {
      // Either the run is over, and so is its job; or another runner won this attempt and works the
      // job now: acking would take it from under that runner, which could then die with nobody to
      // redeliver it to. Left alone, the job is the holder's to finish (or comes back if it dies).
      // The refusal says which (`details.terminal`); when it does not, the run is taken as live (the safe answer).
      if (err.details?.terminal !== true) {
        log.info({ reason: err.message }, 'job left to the runner that holds the run');
        return { kind: 'abandon' };
      }
      log.info({ reason: err.message }, 'job dropped: the run is over');
      return { kind: 'ack' };
    }
    const heldFor = retryAfterMs(err);
    if (heldFor !== null) {
      // Another runner holds the run and was heard from within its lease: alive, however JetStream
      // came to redeliver its job. Handed back, the job comes again once the lease may have run out,
      // and is claimed then if the holder stayed silent (or found done if it finished).
      log.info({ retry_after_ms: heldFor }, 'job handed back: the run is held by a live runner');
      return { kind: 'nak', delayMs: Math.min(MAX_HELD_NAK_MS, Math.max(MIN_HELD_NAK_MS, heldFor + 250)) };
    }
    if (isAppError(err) && err.retryable) return { kind: 'nak', delayMs: 5_000 };
    throw err;
  }
  const execution = new RunExecution(deps, claim.job, claim.attempt, claimId, claim.run.status, log);
  track(execution);
  let result: JobResult;
  try {
    result = await execution.execute();
  } finally {
    track(null);
  }
  // Handed back (a stop, or the runs service out of reach): the lease ends here so the job's next
  // runner claims the run at once. Best effort: unreleased, the lease runs out by itself.
  if (result.kind === 'nak') {
    const ref = { run_id: job.run_id, attempt: claim.attempt, claim_id: claimId };
    await call(deps.nc, rpc.runs.release, ref, 2_000).catch((err: unknown) =>
      log.info({ err }, 'the run was not released; the next runner claims it once its lease ran out'),
    );
  }
  return result;
}

class RunExecution implements LiveRun {
  readonly runId: string;
  private readonly sink: EventSink;
  private status: RunStatus;
  private stopReason: StopReason | null = null;
  private session: HarnessSession | null = null;
  private sandbox: Sandbox | null = null;
  private turnStarted = false;
  private turnEnded = false;
  private interrupting = false;
  /** Steers signalled and not yet taken, by control id; their text is read from the threads service. */
  private readonly pendingSteers: string[] = [];
  /** Every control id signalled to this attempt: each is taken at most once (a replayed signal is dropped). */
  private readonly steersSignalled = new Set<string>();
  private steering = false;
  /** The check of a cancel signal under way; `cancelRecheck` asks for one more after it. */
  private cancelCheck: Promise<void> | null = null;
  private cancelRecheck = false;
  /** Woken by an `interaction` signal (or a stop) while a question waits for its answer. */
  private wakeQuestion: (() => void) | null = null;
  private killTimer: NodeJS.Timeout | undefined;
  private measuringDisk = false;
  /** Which bound on disk the sandbox went past, once it did (DISK_FULL_ERROR says so). */
  private diskOverrun: DiskOverrun | null = null;
  /** A newer attempt (another runner) holds the run: nothing this one reports counts any more. */
  private fenced = false;

  constructor(
    private readonly deps: RunDeps,
    private readonly job: RunJob,
    private readonly attempt: number,
    private readonly claimId: string,
    status: RunStatus,
    private readonly log: Logger,
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
    if (!this.session || !this.turnStarted || this.turnEnded) return;
    const session = this.session;
    this.interruptTurn();
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
  private interruptTurn(): void {
    const session = this.session;
    if (!session || this.interrupting || this.turnEnded) return;
    this.interrupting = true;
    void session.interrupt().finally(() => {
      this.interrupting = false;
    });
  }

  async execute(): Promise<JobResult> {
    const { deps, job } = this;
    const signals = deps.nc.subscribe(subjects.runSignal(job.run_id), {
      callback: (err, msg) => {
        if (err) return;
        if (!isPlainPublish(msg)) {
          this.log.warn({ reply: msg.reply }, 'refused a signal that was not published as one');
          return;
        }
        try {
          const parsed = RunSignal.safeParse(decodeJson(msg.data));
          if (parsed.success) this.onSignal(parsed.data);
        } catch {
          // Not JSON: not a signal of ours.
        }
      },
    });
    const timeout = setTimeout(() => this.stop('timeout'), Math.max(0, deps.config.RUN_TIMEOUT_MS));
    const poll = setInterval(() => void this.pollRun(), deps.config.RUN_POLL_MS);
    const disk = setInterval(() => void this.checkDisk(), deps.config.SANDBOX_DISK_CHECK_MS);
    try {
      return await this.work();
    } catch (err) {
      return await this.failUnexpectedly(err);
    } finally {
      clearTimeout(timeout);
      clearInterval(poll);
      clearInterval(disk);
      if (this.killTimer) clearTimeout(this.killTimer);
      signals.unsubscribe();
      if (this.isFenced) this.log.info({ attempt: this.attempt }, 'fenced: a newer attempt holds the run; leaving it');
      if (this.session) {
        // A fenced attempt's harness is stopped, not kept for the thread's next run: the thread was
        // taken over, so its process holds a conversation that misses the new attempt's turn, and
        // left running it would go on acting in a workspace that is no longer this attempt's. A
        // cancelled or timed-out run takes its harness with it too, also when the stop came while
        // the harness was still starting and no turn had begun.
        const stopped =
          this.stopReason === 'cancel' || this.stopReason === 'timeout' || this.stopReason === 'disk_full';
        if (this.isFenced || stopped) await this.deps.sessions.discard(job.thread_id, this.session);
        // Kept warm for the thread's next run, and nothing else: what the agent left running goes
        // (or, when that could not be made sure of, the jail and the harness with it).
        else if (await this.stopLeftovers(this.session)) this.deps.sessions.release(job.thread_id, this.session);
      }
    }
  }

  private async work(): Promise<JobResult> {
    const { deps, job } = this;
    if (!deps.modelConfigured) return this.finish({ to: 'failed', error: MODEL_NOT_CONFIGURED });
    if (this.status === 'queued' && !(await this.move('starting'))) return this.settledResult();
    if (this.status === 'cancelling') return this.finish({ to: 'cancelled' });

    // A takeover continues the lost attempt's turn, which needs what it left on this disk; one lost
    // before its turn began starts the run as a first attempt would.
    const takeover = continuesLostTurn(this.attempt, this.status);
    if (takeover && !(await deps.sandboxes.exists(job.thread_id))) {
      return this.finish({ to: 'failed', error: runnerLost('its workspace is not on this runner') });
    }
    try {
      const started = performance.now();
      this.sandbox = await withSpan('prepare sandbox', { attributes: { 'threadwork.thread_id': job.thread_id } }, () =>
        deps.sandboxes.prepare(job, this.sandboxClaim()),
      );
      sandboxStart().record((performance.now() - started) / 1000, { 'threadwork.sandbox.provider': 'local' });
      this.sink.push({
        type: 'sandbox.ready',
        sandbox_id: this.sandbox.id,
        layers: deps.isolation.layers,
        egress: deps.isolation.egress.mode,
      });
    } catch (err) {
      if (err instanceof SandboxTakenError) return this.sandboxTaken(err);
      if (!(err instanceof SandboxError)) throw err;
      return this.finish({ to: 'failed', error: { code: 'sandbox_failed', message: err.message } });
    }
    if (this.stopReason) return this.afterStop();
    // Starting a harness stops any other process serving this sandbox (SessionPool.acquire), which
    // must not be the one of a newer attempt that took the run over while this one was held up.
    await this.refresh();
    if (this.fenced || this.isTerminal) return this.settledResult();
    if (this.statusNow() === 'cancelling') return this.finish({ to: 'cancelled' });

    try {
      this.session = await deps.sessions.acquire(this.sandbox, {
        model: job.model,
        mustResume: takeover && this.sandbox.sessionId !== null,
      });
    } catch (err) {
      if (err instanceof SandboxTakenError) return this.sandboxTaken(err);
      if (err instanceof ResumeFailedError) {
        return this.finish({
          to: 'failed',
          error: runnerLost(`its harness session could not be resumed: ${err.message}`),
        });
      }
      return this.finish({
        to: 'failed',
        error: { code: 'harness_crashed', message: `the harness did not start: ${errorMessage(err)}` },
      });
    }
    if (this.stopReason) return this.afterStop();

    if (!(await this.move('running', this.sandbox.id))) return this.settledResult();
    // A cancel may have come in while the sandbox was prepared.
    if (this.statusNow() === 'cancelling') return this.finish({ to: 'cancelled' });

    const outcome = await this.runTurn(this.session);
    if (this.killTimer) clearTimeout(this.killTimer);
    // A stopped turn takes its harness with it (process group and all), so nothing the agent
    // started keeps running; the next run resumes the session in a new process.
    if (
      !outcome.alive ||
      this.stopReason === 'cancel' ||
      this.stopReason === 'timeout' ||
      this.stopReason === 'disk_full'
    ) {
      await deps.sessions.discard(job.thread_id, this.session);
      // Nothing of the jail runs now: what the agent wrote past the bound goes at once, not at the
      // thread's next run, which may never come (the disk is every sandbox's).
      if (this.stopReason === 'disk_full' && this.sandbox && !this.isFenced) {
        await deps.sandboxes
          .freeOutgrown(this.sandbox, this.diskMax())
          .catch((err: unknown) => this.log.warn({ err }, 'the outgrown sandbox’s space could not be freed'));
      }
    } else {
      // Before the runner's git reads the workspace, nothing of the agent's may still be changing it.
      await this.stopLeftovers(this.session);
    }
    // Taken over meanwhile (this runner was thought dead): the workspace is the new attempt's now.
    if (!this.isFenced) await this.refresh();
    if (this.isFenced) return { kind: 'abandon' };
    if (this.stopReason === 'shutdown' && outcome.status !== 'completed') {
      // Handed back: the next runner takes the job over as a new attempt and resumes the session.
      await this.sink.flush();
      return { kind: 'nak', delayMs: 0 };
    }

    const decision = decideOutcome(outcome, outcome.stoppedDuringTurn, {
      timeoutMs: deps.config.RUN_TIMEOUT_MS,
      disk: this.overrun(),
    });
    try {
      // A sandbox past its bound is not committed (nor pushed): the next run starts from the branch as it was.
      if (outcome.stoppedDuringTurn !== 'disk_full') await this.report(decision.to, outcome);
    } catch (err) {
      if (err instanceof SandboxTakenError) return this.sandboxTaken(err);
      throw err;
    }
    return this.finish(decision, usageOrUndefined(outcome.usage));
  }

  /** The turn's outcome, and the stop (if any) that came while the turn was still going. */
  private async runTurn(
    session: HarnessSession,
  ): Promise<TurnOutcome & { alive: boolean; stoppedDuringTurn: StopReason | null }> {
    const { job } = this;
    const outcome = await session.runTurn(
      {
        prompt: job.prompt,
        model: job.model,
        reasoningEffort: job.reasoning_effort,
        collaborationMode: job.collaboration_mode,
        metadata: {
          threadwork_run_id: job.run_id,
          threadwork_thread_id: job.thread_id,
          threadwork_attempt: String(this.attempt),
        },
      },
      {
        chunk: (chunk) => {
          this.sink.push(chunk);
          // Still going after a stop: the interrupt did not take, so ask again.
          if (this.stopReason && this.turnStarted) this.interruptTurn();
        },
        question: (key, questions) => this.ask(key, questions),
        started: () => {
          this.turnStarted = true;
          if (this.stopReason) {
            const reason = this.stopReason;
            this.stopReason = null;
            this.stop(reason);
          }
          void this.applySteers();
        },
      },
    );
    this.turnEnded = true;
    return { ...outcome, alive: session.alive, stoppedDuringTurn: this.stopReason };
  }

  // --- signals and polling -------------------------------------------------------------------

  private onSignal(signal: RunSignal): void {
    switch (signal.type) {
      case 'cancel':
        this.confirmCancel();
        return;
      case 'steer':
        if (this.steersSignalled.has(signal.control_id)) {
          this.log.warn({ control_id: signal.control_id }, 'steer dropped: its control was signalled before');
          return;
        }
        this.steersSignalled.add(signal.control_id);
        this.pendingSteers.push(signal.control_id);
        void this.applySteers();
        return;
      case 'interaction':
        this.wakeQuestion?.();
        return;
    }
  }

  /**
   * A cancel signal is a hint: anyone who may signal could send one. The run stops only once the
   * runs service shows it cancelling (or taken over); otherwise the signal is refused and logged.
   * A signal that arrives while one is being checked is checked again after it (the first check
   * may have read the run just before its cancel was written), never more than one at a time.
   */
  private confirmCancel(): void {
    if (this.cancelCheck) {
      this.cancelRecheck = true;
      return;
    }
    this.cancelCheck = (async () => {
      do {
        this.cancelRecheck = false;
        await this.checkCancel();
      } while (this.cancelRecheck && !this.stopReason);
    })().finally(() => {
      this.cancelCheck = null;
    });
  }

  private async checkCancel(): Promise<void> {
    try {
      const run = await readAttempt(this.deps.nc, this.attemptRef(), 0);
      if (run.attempt !== this.attempt || run.terminal) this.stop('fenced');
      else if (run.status === 'cancelling') this.stop('cancel');
      else
        this.log.warn(
          { status: run.status },
          'refused a cancel signal: the runs service does not show the run cancelling',
        );
    } catch (err) {
      // The poll still sees a real cancel once the runs service answers again.
      this.log.debug({ err }, 'cancel signal not checked: the runs service did not answer');
    }
  }

  /** Signals are core NATS and can be missed; the run's state in the runs service cannot. */
  private async pollRun(): Promise<void> {
    // Polled for the whole of the job, also once the turn ended or a stop began: each poll renews
    // this runner's lease on the run, which keeps any other claim from taking it over meanwhile.
    try {
      const run = await readAttempt(this.deps.nc, this.attemptRef(), 0);
      if (this.stopReason || this.turnEnded) return;
      if (run.attempt !== this.attempt || run.terminal) this.stop('fenced');
      else if (run.status === 'cancelling') this.stop('cancel');
    } catch (err) {
      this.log.debug({ err }, 'run poll failed');
    }
  }

  /**
   * Steers go to the turn once it has started, one at a time in the order signalled; a steer after
   * the turn ended is left to the threads service (it queues it). Each is read back from the
   * threads service first, by this attempt's claim: only a pending steer of this run reaches the
   * harness, with the text its owner sent, whatever the signal was.
   */
  private async applySteers(): Promise<void> {
    const session = this.session;
    if (!session || !this.turnStarted || this.steering) return;
    this.steering = true;
    try {
      while (this.pendingSteers.length > 0 && !this.turnEnded) {
        const controlId = this.pendingSteers.shift()!;
        const prompt = await this.readSteer(controlId);
        if (prompt === null) continue;
        if (!(await session.steer(prompt))) {
          this.log.info({ control_id: controlId }, 'steer not applied: the turn has ended');
          continue;
        }
        this.sink.push({ type: 'control.applied', control_id: controlId, kind: 'steer' });
        const event: ControlAppliedEvent = {
          control_id: controlId,
          run_id: this.job.run_id,
          thread_id: this.job.thread_id,
          at: new Date().toISOString(),
        };
        await this.publish(domainEvents.controlApplied, event, `${controlId}:applied`);
      }
    } finally {
      this.steering = false;
    }
    // Signalled while the last one was being given: it would wait for a signal that has come.
    if (this.pendingSteers.length > 0 && !this.turnEnded) void this.applySteers();
  }

  /**
   * The text of steer `controlId` as the threads service holds it, or null (logged with the run's
   * id) for a control that is no pending steer of this run: unknown, another run's, already
   * applied. One the threads service cannot be asked about now is dropped too; it stays pending
   * there, and is queued once the run ends.
   */
  private async readSteer(controlId: string): Promise<string | null> {
    try {
      const steer = await call(
        this.deps.nc,
        rpc.threads.steerRead,
        { run_id: this.job.run_id, claim_id: this.claimId, control_id: controlId },
        5_000,
      );
      return steer.prompt;
    } catch (err) {
      if (isAppError(err) && (err.code === 'not_found' || err.code === 'already_settled')) {
        this.log.warn({ control_id: controlId, reason: err.message }, 'steer dropped: no pending steer of this run');
      } else {
        this.log.warn({ err, control_id: controlId }, 'steer dropped: the threads service could not confirm it');
      }
      return null;
    }
  }

  // --- questions -----------------------------------------------------------------------------

  /**
   * The harness asks: the runs service records the interaction (the run waits for input) and the
   * answer comes back by signal, or by looking again every poll interval in case it was missed.
   * A stop answers nothing (the turn is being interrupted anyway).
   */
  private async ask(key: string, questions: Question[]): Promise<QuestionAnswers> {
    const { nc } = this.deps;
    await this.sink.flush();
    let interactionId: string;
    try {
      const created = await call(nc, rpc.runs.interactionCreate, {
        run_id: this.job.run_id,
        attempt: this.attempt,
        claim_id: this.claimId,
        key,
        kind: 'question',
        questions,
      });
      interactionId = created.id;
    } catch (err) {
      if (isAppError(err) && err.code === 'already_settled') {
        // The run is being cancelled or was taken over; the poll tells which.
        void this.pollRun();
        return {};
      }
      throw err;
    }
    while (!this.stopReason) {
      try {
        const settlement = await call(
          nc,
          rpc.runs.interactionSettlement,
          { run_id: this.job.run_id, claim_id: this.claimId, interaction_id: interactionId },
          5_000,
        );
        if (settlement.interaction.status !== 'pending') {
          return harnessAnswers(settlement.interaction.status, settlement.answers);
        }
      } catch (err) {
        this.log.debug({ err }, 'reading the settlement failed; looking again');
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.deps.config.RUN_POLL_MS);
        this.wakeQuestion = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeQuestion = null;
    }
    return {};
  }

  // --- the end of a run ----------------------------------------------------------------------

  /** Commits the workspace and reports the candidate (every repository) and the agent's reply. */
  private async report(to: TerminalRunStatus, outcome: TurnOutcome): Promise<void> {
    const { deps, job, sandbox } = this;
    await this.sink.flush();
    if (sandbox) {
      for (const repo of sandbox.repos) {
        try {
          const candidate = await commitAndDiff(repo, sandbox.take, {
            message: commitMessage(job),
            maxDiffBytes: deps.config.DIFF_MAX_BYTES,
            owner: sandbox.owner,
          });
          // A run that did not complete reports a candidate only if it changed something.
          if (to !== 'completed' && !candidate.committed) continue;
          if (candidate.committed) await this.pushBranch(repo);
          const event: CandidateProducedEvent = {
            thread_id: job.thread_id,
            run_id: job.run_id,
            owner_id: job.owner_id,
            project_repository_id: repo.project_repository_id,
            repository_id: repo.repository_id,
            branch: repo.branch,
            base_branch: repo.base_branch,
            base_revision: candidate.base_revision,
            candidate_revision: candidate.candidate_revision,
            diff: candidate.diff,
            truncated: candidate.truncated,
            files: candidate.files,
            stats: candidate.stats,
            at: new Date().toISOString(),
          };
          await this.publish(domainEvents.candidateProduced, event, `${job.run_id}:${repo.project_repository_id}`);
        } catch (err) {
          // Taken over since the last look: the workspace and what becomes of it are the newer attempt's.
          if (err instanceof SandboxTakenError) throw err;
          this.log.error({ err, repo: repo.full_name }, 'the workspace could not be committed');
          this.sink.push({ type: 'error', code: 'commit_failed', message: `${repo.full_name}: ${errorMessage(err)}` });
          // Review shows `diff.status: error` for this repository rather than an older candidate as if current.
          const failed: CandidateFailedEvent = {
            thread_id: job.thread_id,
            run_id: job.run_id,
            owner_id: job.owner_id,
            project_repository_id: repo.project_repository_id,
            repository_id: repo.repository_id,
            message: errorMessage(err).slice(0, 4096),
            at: new Date().toISOString(),
          };
          await this.publish(
            domainEvents.candidateFailed,
            failed,
            `${job.run_id}:${repo.project_repository_id}:failed`,
          );
        }
      }
    }
    if (outcome.reply && outcome.reply.text.trim()) {
      const event: MessageCompletedEvent = {
        thread_id: job.thread_id,
        run_id: job.run_id,
        // One reply per run, whichever attempt got there.
        message_key: `${job.run_id}:reply`,
        text: outcome.reply.text,
        at: new Date().toISOString(),
      };
      await this.publish(domainEvents.messageCompleted, event, `${job.run_id}:reply`);
    }
  }

  /**
   * Publishes the thread branch to the repository it came from (its canonical URL, from the job;
   * never a remote the workspace names), where repohost opens or updates the pull request (a local
   * bare repository just gets the branch). The push leases on the revision the remote's branch had
   * when the run began: it replaces what this thread pushed before, never something pushed since —
   * e.g. by the attempt that took this run over. When the branch did move, a run that is still
   * this attempt's reads it again and pushes once more. A push that fails leaves the candidate in
   * the sandbox and says so in the run's events.
   */
  private async pushBranch(repo: SandboxRepo): Promise<void> {
    const ref = `refs/heads/${repo.branch}`;
    try {
      const hold = { runId: this.job.run_id, claimId: this.claimId };
      const token = await this.deps.credentials(hold, repo.repository_id, repo.clone_url);
      const remote = { url: repo.clone_url, token };
      let lease = repo.start_revision ?? '';
      for (let tries = 0; ; tries++) {
        try {
          await git(
            repo.gitDir,
            ['push', '--quiet', `--force-with-lease=${ref}:${lease}`, '--', remote.url, `HEAD:${ref}`],
            {
              repo: runnerRepo(repo),
              remote,
            },
          );
          return;
        } catch (err) {
          if (tries > 0 || !/stale info|fetch first|rejected/.test(errorMessage(err))) throw err;
          await this.refresh();
          if (this.isFenced) throw new Error("this attempt was taken over; the branch is the new attempt's");
          lease = (await remoteRevisions(repo.gitDir, remote, [ref])).revisions.get(ref) ?? '';
          this.log.warn(
            { repo: repo.full_name },
            'the thread branch moved on the remote since the run began; pushing over it',
          );
        }
      }
    } catch (err) {
      this.log.warn({ err, repo: repo.full_name }, 'the thread branch could not be pushed');
      this.sink.push({ type: 'error', code: 'push_failed', message: `${repo.full_name}: ${errorMessage(err)}` });
    }
  }

  /** Ends the run, through whatever moves the state machine needs from where it stands. */
  private async finish(decision: Decision, usage?: RunUsage): Promise<JobResult> {
    if (decision.error) this.log.info({ error: decision.error }, `run ${decision.to}`);
    for (let round = 0; round < 3; round++) {
      const steps = stepsTo(this.status, decision.to);
      if (!steps) return this.settledResult();
      let ok = true;
      for (const to of steps) {
        const terminal = to === decision.to;
        if (!(await this.move(to, undefined, terminal ? decision.error : undefined, terminal ? usage : undefined))) {
          if (this.fenced) return { kind: 'abandon' };
          ok = false;
          break;
        }
        if (this.isTerminal) return { kind: 'ack' };
      }
      if (ok && this.isTerminal) return { kind: 'ack' };
      // Refused: the run moved meanwhile (a cancel, an answer). Read where it stands and go again.
      await this.refresh();
      if (this.fenced) return { kind: 'abandon' };
      if (this.isTerminal) return { kind: 'ack' };
    }
    // Never leave the run live: fail it from wherever it is.
    if (
      await this.move('failed', undefined, { code: 'runner_error', message: 'the run could not be ended as decided' })
    ) {
      return { kind: 'ack' };
    }
    return this.settledResult();
  }

  /** Read through a call: `status` changes across awaits, which narrowing does not see. */
  private statusNow(): RunStatus {
    return this.status;
  }

  /** Known to be fenced out: a move or an append was refused, or a poll found a newer attempt. */
  private get isFenced(): boolean {
    return this.fenced || this.stopReason === 'fenced';
  }

  private get isTerminal(): boolean {
    return this.status === 'completed' || this.status === 'failed' || this.status === 'cancelled';
  }

  /** Moves the run after flushing the events before it; false when the move was refused. */
  private async move(to: RunStatus, sandboxId?: string, error?: RunError, usage?: RunUsage): Promise<boolean> {
    await this.sink.flush();
    try {
      const run = await call(this.deps.nc, rpc.runs.transition, {
        run_id: this.job.run_id,
        attempt: this.attempt,
        claim_id: this.claimId,
        to,
        ...(sandboxId ? { sandbox_id: sandboxId } : {}),
        ...(error ? { error } : {}),
        ...(usage ? { usage } : {}),
      });
      this.status = run.status;
      if (run.attempt !== this.attempt) this.fenced = true;
      return !this.fenced;
    } catch (err) {
      if (isAppError(err) && err.code === 'already_settled') {
        this.fenced = true;
        return false;
      }
      if (isAppError(err) && err.code === 'invalid_request') {
        this.log.debug({ err, to }, 'move refused');
        return false;
      }
      throw err;
    }
  }

  /**
   * Kills what the agent left running in its jail, keeping the harness; logs what it killed. A sweep
   * that did not settle (or failed) may have missed a process, which would go on beside the runner's
   * own git over the workspace and into the thread's next run: then the session is discarded, which
   * kills the jail whole (its pid namespace, every process in it). True when the harness was kept.
   */
  private async stopLeftovers(session: HarnessSession): Promise<boolean> {
    const sweep = await session.stopLeftovers().catch((err: unknown) => {
      this.log.warn({ err }, 'the processes the agent left running could not be listed');
      return { processes: [], settled: false };
    });
    const processes = sweep.processes.map((p) => p.slice(0, 200));
    if (processes.length > 0) this.log.warn({ processes }, 'stopped processes the agent left running');
    if (sweep.settled && session.alive) return true;
    if (!session.alive) {
      await this.deps.sessions.discard(this.job.thread_id, session);
      return false;
    }
    this.log.error(
      { processes },
      'the processes the agent left running could not all be stopped one by one; killing its jail and the harness',
    );
    await this.deps.sessions.discard(this.job.thread_id, session);
    return false;
  }

  private overrun(): DiskOverrun {
    return this.diskOverrun ?? { bytes: this.deps.config.SANDBOX_DISK_MAX_BYTES };
  }

  private diskMax(): DiskUsage {
    return { bytes: this.deps.config.SANDBOX_DISK_MAX_BYTES, inodes: this.deps.config.SANDBOX_DISK_MAX_INODES };
  }

  /**
   * Stops the turn once the sandbox holds more than SANDBOX_DISK_MAX_BYTES or SANDBOX_DISK_MAX_INODES
   * (measured while a turn runs, what its jail holds unlinked included), or cannot be measured: a
   * measure the agent could make fail would be no bound at all.
   */
  private async checkDisk(): Promise<void> {
    const sandbox = this.sandbox;
    if (!sandbox || !this.turnStarted || this.turnEnded || this.stopReason || this.measuringDisk) return;
    this.measuringDisk = true;
    try {
      let over: DiskOverrun | null;
      const max = this.diskMax();
      try {
        const used = await this.deps.sandboxes.diskUsage(sandbox, this.session?.pid);
        over = used.bytes > max.bytes ? { bytes: max.bytes } : used.inodes > max.inodes ? { inodes: max.inodes } : null;
        if (over) {
          this.log.warn(
            { used_bytes: used.bytes, used_inodes: used.inodes, max_bytes: max.bytes, max_inodes: max.inodes },
            'the sandbox grew past its bound on disk; stopping the run',
          );
        }
      } catch (err) {
        // Whatever failed (du, a process of the jail that could not be read, the sandbox gone), it went unmeasured.
        over = { unmeasured: true };
        this.log.error({ err }, 'the sandbox could not be measured on disk; stopping the run as past its bound');
      }
      if (!over || this.stopReason) return;
      this.diskOverrun = over;
      await this.deps.sandboxes.outgrown(sandbox).catch((err: unknown) => {
        if (err instanceof SandboxTakenError) throw err;
        this.log.warn({ err }, 'the outgrown sandbox could not be marked to be rebuilt');
      });
      this.stop('disk_full');
    } catch (err) {
      if (err instanceof SandboxTakenError) return;
      this.log.warn({ err }, 'the sandbox’s use of disk could not be checked');
    } finally {
      this.measuringDisk = false;
    }
  }

  /** This attempt, as the sandbox takes it: whether it still holds the run is asked of the runs service. */
  private sandboxClaim(): SandboxClaim {
    return {
      run_id: this.job.run_id,
      attempt: this.attempt,
      runner_id: this.deps.runnerId,
      claim_id: this.claimId,
      holds: () => attemptHolds(this.deps.nc, this.attemptRef()),
    };
  }

  /** A DOMAIN event about this run, attested under this attempt's claim before it goes out. */
  private publish(def: DomainEventDef, event: unknown, msgId: string): Promise<boolean> {
    return publishAttested(this.deps.nc, this.deps.js, this.log, this.attemptRef(), def, event, msgId);
  }

  private attemptRef(): AttemptRef {
    return { run_id: this.job.run_id, attempt: this.attempt, claim_id: this.claimId };
  }

  private async refresh(): Promise<void> {
    const run = await readAttempt(this.deps.nc, this.attemptRef());
    this.status = run.status;
    if (run.attempt !== this.attempt) this.fenced = true;
  }

  /** The sandbox was taken by a newer attempt, of this run or of one after it: nothing more is done to it. */
  private async sandboxTaken(err: SandboxTakenError): Promise<JobResult> {
    this.log.info({ attempt: this.attempt, reason: err.message }, 'the sandbox is a newer attempt’s; leaving the run');
    return this.settledResult();
  }

  /** After the run ended or moved on without us: ack if it ended on our attempt, else leave the job alone. */
  private async settledResult(): Promise<JobResult> {
    if (!this.fenced) await this.refresh().catch(() => undefined);
    return this.fenced ? { kind: 'abandon' } : { kind: 'ack' };
  }

  /** A stop that came before the turn began. */
  private async afterStop(): Promise<JobResult> {
    switch (this.stopReason) {
      case 'fenced':
        return { kind: 'abandon' };
      case 'shutdown':
        return { kind: 'nak', delayMs: 0 };
      case 'timeout':
        return this.finish({ to: 'failed', error: TIMEOUT_ERROR(this.deps.config.RUN_TIMEOUT_MS) });
      case 'disk_full':
        return this.finish({ to: 'failed', error: DISK_FULL_ERROR(this.overrun()) });
      default:
        return this.finish({ to: 'cancelled' });
    }
  }

  private async failUnexpectedly(err: unknown): Promise<JobResult> {
    this.log.error({ err }, 'run failed unexpectedly');
    if (this.fenced) return { kind: 'abandon' };
    try {
      return await this.finish({ to: 'failed', error: { code: 'runner_error', message: errorMessage(err) } });
    } catch (again) {
      // The runs service is unreachable: hand the job back so the run is ended by a later delivery.
      this.log.error({ err: again }, 'the failed run could not be reported; handing the job back');
      return { kind: 'nak', delayMs: 10_000 };
    }
  }
}

function runnerLost(why: string): RunError {
  return { code: 'runner_lost', message: `the runner of an earlier attempt was lost and ${why}` };
}

function usageOrUndefined(usage: RunUsage): RunUsage | undefined {
  return Object.keys(usage).length > 0 ? usage : undefined;
}

function commitMessage(job: RunJob): string {
  const firstLine = job.prompt.split('\n')[0]?.slice(0, 72) ?? '';
  return `${firstLine || 'Threadwork run'}\n\nThreadwork run ${job.run_id} on thread ${job.thread_id}.`;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
