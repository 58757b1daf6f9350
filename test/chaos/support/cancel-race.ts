// Cancel racing completion: one run's race, and what must hold after it.
import type { ThreadWithRun } from '@threadwork/contracts';
import { ControlSubmission, Run } from '@threadwork/contracts';
import { isAppError } from '@threadwork/platform';
import { uniqueId } from '@threadwork/testing';
import { logProblems, statusTrail } from './api.js';
import {
  api,
  controlsOf,
  create,
  jitter,
  liveRunOf,
  logOf,
  loggedOutcome,
  poll,
  Runner,
  runOf,
  show,
  threadOf,
  user,
} from './race-api.js';

export const CANCEL_CASES = [
  /** A running run completes while the user cancels it. */
  'complete-vs-cancel',
  /** A running run completes while the user cancels it and the runner, signalled, confirms the cancel. */
  'complete-vs-confirmed-cancel',
  /** A running run fails while the user cancels it and the runner confirms. */
  'fail-vs-confirmed-cancel',
  /** A queued run is cancelled while a runner claims, starts and completes it. */
  'claim-and-complete-vs-cancel-queued',
] as const;
type CancelCase = (typeof CANCEL_CASES)[number];

export interface CancelRace {
  at: string;
  kind: CancelCase;
  thread: ThreadWithRun;
  /** The runner of the run, for the cases where it runs before the race. */
  driver: Runner | undefined;
  /** What each side saw of the run once its call returned. */
  seen: { who: string; run: Run }[];
  problems: string[];
}

/**
 * A thread whose run is running (or still queued, for the queued case), with a follow-up queued
 * behind it: however the race goes, the follow-up must be admitted exactly once when the run ends.
 */
export async function prepareCancel(at: string, kind: CancelCase): Promise<CancelRace> {
  const race: CancelRace = {
    at,
    kind,
    thread: await create(`cancel race ${at}`),
    driver: undefined,
    seen: [],
    problems: [],
  };
  if (kind !== 'claim-and-complete-vs-cancel-queued') race.driver = await Runner.started(race.thread.run_id);
  const followUp = await api(
    user,
    'POST',
    `/v1/threads/${race.thread.id}/queue`,
    { prompt: `${at}: after`, client_request_id: uniqueId('after-') },
    { retry: true },
  );
  const pending = ControlSubmission.parse(followUp.body).control;
  if (pending.status !== 'pending') {
    race.problems.push(`${at}: a follow-up queued behind a live run is ${pending.status}`);
  }
  return race;
}

/** The cancel and the run's own end, at once. */
export async function raceCancel(race: CancelRace): Promise<void> {
  const { at, kind, driver, seen } = race;
  const runId = race.thread.run_id;
  const queued = kind === 'claim-and-complete-vs-cancel-queued';
  const problem = (text: string) => race.problems.push(`${at}: ${text}`);
  const runner = async () => {
    if (!queued) {
      const to = kind === 'fail-vs-confirmed-cancel' ? 'failed' : 'completed';
      const error = to === 'failed' ? { error: { code: 'chaos', message: 'failed on purpose' } } : {};
      seen.push({ who: `runner ${to}`, run: await driver!.to(to, error) });
      return;
    }
    let claimed: Runner;
    try {
      claimed = await Runner.claim(runId);
    } catch (err) {
      // The cancel ended the queued run first: the runner is told so and drops the job.
      if (isAppError(err) && err.code === 'already_settled') return;
      throw err;
    }
    try {
      await claimed.start();
      seen.push({ who: 'runner completed', run: await claimed.to('completed') });
    } catch (err) {
      // The cancel caught the run while it was starting: a runner stops and confirms instead.
      if (!isAppError(err) || err.code !== 'invalid_request' || (await runOf(runId)).status !== 'cancelling') throw err;
      seen.push({ who: 'runner confirming', run: await claimed.to('cancelled') });
    }
  };
  const canceller = async () => {
    const reply = await api(user, 'POST', `/v1/runs/${runId}/cancel`, undefined, { retry: true });
    const run = Run.safeParse(reply.body);
    if (!run.success || (reply.status !== 200 && reply.status !== 202)) {
      problem(`cancel → ${show(reply)}`);
      return;
    }
    seen.push({ who: `cancel ${reply.status}`, run: run.data });
    if (reply.status === 200 && !run.data.terminal) problem(`cancel answered 200 for a ${run.data.status} run`);
    if (reply.status === 202 && !run.data.terminal && run.data.status !== 'cancelling') {
      problem(`cancel answered 202 for a ${run.data.status} run`);
    }
    // The signalled runner stops its harness and confirms (the run may have ended meanwhile: then it learns how).
    if (kind !== 'complete-vs-cancel' && !queued && reply.status === 202) {
      seen.push({ who: 'runner confirming', run: await driver!.to('cancelled') });
    }
  };
  await Promise.all([jitter(20).then(runner), jitter(20).then(canceller)]);
}

/** One terminal state, one terminal event, every reader agreeing; then the follow-up. */
export async function cancelProblems(race: CancelRace): Promise<string[]> {
  const { at, thread, seen, problems } = race;
  const runId = thread.run_id;
  const problem = (text: string) => problems.push(`${at}: ${text}`);
  const final = await runOf(runId);
  const events = await logOf(runId);
  const log = logProblems(events);
  if (!final.terminal) problem(`the run is still ${final.status} after both sides are done`);
  if (log.length) problem(`log: ${log.join('; ')} (${statusTrail(events).join(' ')})`);
  else if (loggedOutcome(events) !== final.status) {
    problem(`GET says ${final.status}, the log ends ${loggedOutcome(events)} (${statusTrail(events).join(' ')})`);
  }
  if (final.status === 'failed' ? final.error?.code !== 'chaos' : final.error !== null) {
    problem(`${final.status} with error ${JSON.stringify(final.error)}`);
  }
  for (const { who, run } of seen) {
    if (run.terminal && run.status !== final.status) problem(`${who} saw ${run.status}, the run is ${final.status}`);
  }
  if (!final.completed_at) problem('no completed_at');

  // The follow-up queued behind the run is admitted exactly once, after it; cancelling that queued
  // run ends it at once.
  try {
    const next = await poll(`${at}: the follow-up to be admitted`, async () => {
      const [control] = await controlsOf(thread.id);
      return control?.status === 'applied' ? control.created_run_id : undefined;
    });
    if (!next) throw new Error('applied without a run');
    if ((await liveRunOf(thread.id)) !== next) problem(`the follow-up's run ${next} is not the live run`);
    const admitted = await runOf(next);
    if (final.completed_at && admitted.created_at < final.completed_at) {
      problem(`the follow-up was admitted at ${admitted.created_at}, before the run ended at ${final.completed_at}`);
    }
    const cancel = await api(user, 'POST', `/v1/runs/${next}/cancel`, undefined, { retry: true });
    if ((cancel.status !== 202 && cancel.status !== 200) || Run.safeParse(cancel.body).data?.status !== 'cancelled') {
      problem(`cancelling the queued follow-up → ${show(cancel)}`);
    }
    const followLog = await logOf(next);
    if (logProblems(followLog).length) problem(`follow-up log: ${logProblems(followLog).join('; ')}`);
    if ((await controlsOf(thread.id)).length !== 1) problem('the follow-up control was duplicated');
    await poll(
      `${at}: the thread to be idle`,
      async () => (await liveRunOf(thread.id)) === null && (await threadOf(thread.id)).status === 'idle',
    );
  } catch (err) {
    const [controls, live] = await Promise.all([controlsOf(thread.id), liveRunOf(thread.id)]);
    problem(
      `${(err as Error).message} — thread ${thread.id}, run ${runId} (${statusTrail(events).join(' ')}), ` +
        `live run ${live}, controls ${JSON.stringify(controls.map((c) => [c.id, c.status, c.created_run_id]))}`,
    );
  }
  return problems;
}
