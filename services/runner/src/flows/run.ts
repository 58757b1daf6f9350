import type { RunError, RunTicket, RunUsage } from '@threadwork/contracts';
import { withSpan } from '@threadwork/platform';
import { DomainPublishError } from '../clients/domain-events.js';
import { continuesLostTurn, decideOutcome, REPORT_NOT_PUBLISHED, type StopReason } from '../domain/outcome.js';
import { ResumeFailedError, type HarnessSession, type TurnOutcome } from '../harness/harness.js';
import { runnerMetrics } from '../metrics.js';
import { layersFor } from '../sandbox/isolation.js';
import { SandboxError, SandboxTakenError, type Sandbox } from '../sandbox/provider.js';
import { claimJob, listenForSignals, pollRun, refresh, releaseRun, sandboxClaim } from './claim.js';
import { checkDisk, diskMax, overrun } from './disk-watch.js';
import { afterStop, failUnexpectedly, finish, move, sandboxTaken, settledResult } from './finish.js';
import { putSessionAway, stopLeftovers } from './leftovers.js';
import { approvePlan, ask } from './questions.js';
import { report } from './report.js';
import { errorMessage, RunState, type JobResult, type LiveRun, type RunDeps } from './run-state.js';
import { applySteers } from './steers.js';

// One job, start to finish: claim the run, prepare the sandbox, drive the harness through one
// turn while listening for cancel, steer and answers, then commit the workspace, report the
// candidate and the reply, and end the run. Every path out ends the run or hands the job back
// for redelivery; none leaves a run live with nobody working it. The steps live beside this file,
// one concern each, and share the one RunState of the job.

export async function executeJob(
  deps: RunDeps,
  job: RunTicket,
  track: (live: LiveRun | null) => void,
): Promise<JobResult> {
  // Spares wait while this run is on its way to its turn's first event (or to its end before one).
  const arrived = deps.warm?.hold() ?? (() => {});
  try {
    return await claimAndExecute(deps, job, track, arrived);
  } finally {
    arrived();
  }
}

async function claimAndExecute(
  deps: RunDeps,
  job: RunTicket,
  track: (live: LiveRun | null) => void,
  arrived: () => void,
): Promise<JobResult> {
  const log = deps.logger.child({ run_id: job.run_id, thread_id: job.thread_id });
  const claimed = await claimJob(deps, job, log);
  if (!claimed.ok) return claimed.result;
  const { claim } = claimed;
  const run = new RunState(deps, claim.job, claim.attempt, claim.claimId, claim.run.status, log);
  run.arrived = arrived;
  track(run);
  let result: JobResult;
  try {
    result = await execute(run);
  } finally {
    track(null);
  }
  // A spare for the next new thread of these repositories, begun once the run is over: the
  // thread's follow-up, often sent the moment the run completes, finds it held back (hold).
  if (run.turnEnded) deps.warm?.want(run.job);
  // Handed back (a stop, or the runs service out of reach): the lease ends here so the job's next
  // runner claims the run at once.
  if (result.kind === 'nak') {
    await releaseRun(deps, { run_id: job.run_id, attempt: claim.attempt, claim_id: claim.claimId }, log);
  }
  return result;
}

async function execute(run: RunState): Promise<JobResult> {
  const { config } = run.deps;
  const signals = listenForSignals(run);
  const timeout = setTimeout(() => run.stop('timeout'), Math.max(0, config.RUN_TIMEOUT_MS));
  const poll = setInterval(() => void pollRun(run), config.RUN_POLL_MS);
  const disk = setInterval(() => void checkDisk(run), config.SANDBOX_DISK_CHECK_MS);
  try {
    return await work(run);
  } catch (err) {
    return await failUnexpectedly(run, err);
  } finally {
    clearTimeout(timeout);
    clearInterval(poll);
    clearInterval(disk);
    if (run.killTimer) clearTimeout(run.killTimer);
    signals.unsubscribe();
    if (run.isFenced) run.log.info({ attempt: run.attempt }, 'fenced: a newer attempt holds the run; leaving it');
    await putSessionAway(run);
  }
}

async function work(run: RunState): Promise<JobResult> {
  const { deps, job } = run;
  const unconfigured = deps.unconfigured.get(job.harness);
  if (unconfigured) return finish(run, { to: 'failed', error: unconfigured });
  if (run.status === 'queued' && !(await move(run, 'starting'))) return settledResult(run);
  if (run.status === 'cancelling') return finish(run, { to: 'cancelled' });

  // A takeover continues the lost attempt's turn, which needs what it left on this disk; one lost
  // before its turn began starts the run as a first attempt would.
  const takeover = continuesLostTurn(run.attempt, run.status);
  if (takeover && !(await deps.sandboxes.exists(job.thread_id))) {
    return finish(run, { to: 'failed', error: runnerLost('its workspace is not on this runner') });
  }
  let sandbox: Sandbox;
  try {
    const started = performance.now();
    sandbox = await withSpan('prepare sandbox', { attributes: { 'threadwork.thread_id': job.thread_id } }, () =>
      deps.sandboxes.prepare(job, sandboxClaim(run)),
    );
    run.sandbox = sandbox;
    // Adopted from a spare: its harness, already started, is the thread's session from now on.
    if (sandbox.warm) await deps.sessions.adopt(sandbox, sandbox.warm);
    runnerMetrics().sandboxStart.record((performance.now() - started) / 1000, {
      'threadwork.sandbox.provider': 'local',
    });
    run.sink.push({
      type: 'sandbox.ready',
      sandbox_id: sandbox.id,
      layers: layersFor(deps.isolation, job.harness),
      egress: deps.isolation.egress.mode,
    });
  } catch (err) {
    if (err instanceof SandboxTakenError) return sandboxTaken(run, err);
    if (!(err instanceof SandboxError)) throw err;
    return finish(run, { to: 'failed', error: { code: 'sandbox_failed', message: err.message } });
  }
  if (run.stopReason) return afterStop(run);
  // Starting a harness stops any other process serving this sandbox (SessionPool.acquire), which
  // must not be the one of a newer attempt that took the run over while this one was held up. A
  // live session is taken as it is, stopping nothing: the move to `running` below fences that.
  if (!deps.sessions.ready(job.thread_id, job.harness)) {
    await refresh(run);
    if (run.fenced || run.isTerminal) return settledResult(run);
    if (run.statusNow() === 'cancelling') return finish(run, { to: 'cancelled' });
  }

  let session: HarnessSession;
  try {
    session = await deps.sessions.acquire(sandbox, {
      harness: job.harness,
      model: job.model,
      mustResume: takeover && sandbox.sessionId !== null && sandbox.sessionHarness === job.harness,
    });
    run.session = session;
  } catch (err) {
    if (err instanceof SandboxTakenError) return sandboxTaken(run, err);
    if (err instanceof ResumeFailedError) {
      return finish(run, {
        to: 'failed',
        error: runnerLost(`its harness session could not be resumed: ${err.message}`),
      });
    }
    return finish(run, {
      to: 'failed',
      error: { code: 'harness_crashed', message: `the harness did not start: ${errorMessage(err)}` },
    });
  }
  if (run.stopReason) return afterStop(run);

  if (!(await move(run, 'running', sandbox.id))) return settledResult(run);
  // A cancel may have come in while the sandbox was prepared.
  if (run.statusNow() === 'cancelling') return finish(run, { to: 'cancelled' });

  const outcome = await runTurn(run, session);
  if (run.killTimer) clearTimeout(run.killTimer);
  // A stopped turn takes its harness with it (process group and all), so nothing the agent
  // started keeps running; the next run resumes the session in a new process.
  if (!outcome.alive || run.stopReason === 'cancel' || run.stopReason === 'timeout' || run.stopReason === 'disk_full') {
    await deps.sessions.discard(job.thread_id, session);
    // Nothing of the jail runs now: what the agent wrote past the bound goes at once, not at the
    // thread's next run, which may never come (the disk is every sandbox's).
    if (run.stopReason === 'disk_full' && !run.isFenced) {
      await deps.sandboxes
        .freeOutgrown(sandbox, diskMax(run))
        .catch((err: unknown) => run.log.warn({ err }, 'the outgrown sandbox’s space could not be freed'));
    }
  } else {
    // Before the runner's git reads the workspace, nothing of the agent's may still be changing it.
    await stopLeftovers(run, session);
  }
  // Taken over meanwhile (this runner was thought dead): the workspace is the new attempt's now.
  if (!run.isFenced) await refresh(run);
  if (run.isFenced) return { kind: 'abandon' };
  if (run.stopReason === 'shutdown' && outcome.status !== 'completed') {
    // Handed back: the next runner takes the job over as a new attempt and resumes the session.
    await run.sink.flush();
    return { kind: 'nak', delayMs: 0 };
  }

  let decision = decideOutcome(outcome, outcome.stoppedDuringTurn, {
    timeoutMs: deps.config.RUN_TIMEOUT_MS,
    disk: overrun(run),
  });
  try {
    // A sandbox past its bound is not committed (nor pushed): the next run starts from the branch as it was.
    if (outcome.stoppedDuringTurn !== 'disk_full') await report(run, decision.to, outcome);
  } catch (err) {
    if (err instanceof SandboxTakenError) return sandboxTaken(run, err);
    if (!(err instanceof DomainPublishError)) throw err;
    // Review and the thread would go on showing what came before as if it were this run's.
    decision = { to: 'failed', error: REPORT_NOT_PUBLISHED(err.subject) };
  }
  return finish(run, decision, usageOrUndefined(outcome.usage));
}

/** The turn's outcome, and the stop (if any) that came while the turn was still going. */
async function runTurn(
  run: RunState,
  session: HarnessSession,
): Promise<TurnOutcome & { alive: boolean; stoppedDuringTurn: StopReason | null }> {
  const { job } = run;
  const outcome = await session.runTurn(
    {
      prompt: job.prompt,
      model: job.model,
      reasoningEffort: job.reasoning_effort,
      collaborationMode: job.collaboration_mode,
      metadata: {
        threadwork_run_id: job.run_id,
        threadwork_thread_id: job.thread_id,
        threadwork_attempt: String(run.attempt),
      },
    },
    {
      chunk: (chunk) => {
        run.sink.push(chunk);
        run.arrived();
        // Still going after a stop: the interrupt did not take, so ask again.
        if (run.stopReason && run.turnStarted) run.interruptTurn();
      },
      question: (key, questions) => ask(run, key, questions),
      planApproval: (key, plan) => approvePlan(run, key, plan),
      started: () => {
        run.turnStarted = true;
        if (run.stopReason) {
          const reason = run.stopReason;
          run.stopReason = null;
          run.stop(reason);
        }
        void applySteers(run);
      },
    },
  );
  run.turnEnded = true;
  return { ...outcome, alive: session.alive, stoppedDuringTurn: run.stopReason };
}

function runnerLost(why: string): RunError {
  return { code: 'runner_lost', message: `the runner of an earlier attempt was lost and ${why}` };
}

function usageOrUndefined(usage: RunUsage): RunUsage | undefined {
  return Object.keys(usage).length > 0 ? usage : undefined;
}
