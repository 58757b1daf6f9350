// Messages, queues and steers racing a run's end: one thread's race, and what must hold after it.
import type { ThreadWithRun } from '@threadwork/contracts';
import { ControlSubmission, MessageAccepted, Run } from '@threadwork/contracts';
import { uniqueId } from '@threadwork/testing';
import { logProblems } from './api.js';
import {
  allWorkThreads,
  api,
  controlsOf,
  errorCode,
  jitter,
  liveRunOf,
  logOf,
  loggedOutcome,
  messagesOf,
  poll,
  runOf,
  show,
  threadOf,
  user,
} from './race-api.js';
import type { Reply, Runner } from './race-api.js';

export type EndKind = 'completed' | 'failed' | 'cancelled';

interface SentMessage {
  message_id: string;
  prompt: string;
  reply: Reply;
}

export interface ThreadRace {
  at: string;
  thread: ThreadWithRun;
  end: EndKind;
  sends: SentMessage[];
  /** Queued by one client one after another: their runs must come in this order. */
  queues: SentMessage[];
  steers: { prompt: string; reply: Reply }[];
  /** The runs the test ended, in order (the raced one first). */
  driven: string[];
  /** The thread's last run, once threadProblems has found it. */
  last?: Run | undefined;
  problems: string[];
}

/** Ends the run as its runner would: completion, failure, or a user's cancel the runner then confirms. */
async function endRun(driver: Runner, end: EndKind): Promise<void> {
  if (end === 'completed') {
    await driver.to('completed');
  } else if (end === 'failed') {
    await driver.to('failed', { error: { code: 'chaos', message: 'failed on purpose' } });
  } else {
    const reply = await api(user, 'POST', `/v1/runs/${driver.runId}/cancel`, undefined, { retry: true });
    if (reply.status !== 202) throw new Error(`cancel of the running ${driver.runId} → ${show(reply)}`);
    // The harness stopped: the runner reports the cancellation done.
    await driver.to('cancelled');
  }
}

/**
 * The thread's running run ends while three clients act on the thread at once: one sends two
 * messages, one queues three follow-ups one after the other, one steers. Every request carries
 * a client_request_id, so a 503 retry is the same request.
 */
export async function raceOneThread(
  at: string,
  thread: ThreadWithRun,
  driver: Runner,
  end: EndKind,
): Promise<ThreadRace> {
  const race: ThreadRace = {
    at,
    thread,
    end,
    sends: [],
    queues: [],
    steers: [],
    driven: [thread.run_id],
    problems: [],
  };
  const post = (op: string, body: unknown) =>
    api(user, 'POST', `/v1/threads/${thread.id}/${op}`, body, { retry: true });
  const sender = async (n: number) => {
    const message_id = uniqueId('msg-send-');
    const prompt = `${at}: send ${n}`;
    const reply = await post('messages', { prompt, message_id, client_request_id: message_id });
    race.sends.push({ message_id, prompt, reply });
  };
  const queuer = async () => {
    for (let n = 0; n < 3; n++) {
      const message_id = uniqueId('msg-queue-');
      const prompt = `${at}: queue ${n}`;
      const reply = await post('queue', { prompt, message_id, client_request_id: message_id });
      race.queues.push({ message_id, prompt, reply });
    }
  };
  const steerer = async () => {
    const prompt = `${at}: steer`;
    const reply = await post('steer', { prompt, client_request_id: uniqueId('steer-') });
    race.steers.push({ prompt, reply });
  };
  await Promise.all([
    jitter(60).then(() => endRun(driver, end)),
    jitter(30).then(() => Promise.all([sender(0), sender(1)])),
    queuer(),
    jitter(30).then(steerer),
  ]);
  checkReplies(race);
  return race;
}

/** What each reply may be by DESIGN.md section 4 (Behaviour). */
function checkReplies(race: ThreadRace): void {
  const problem = (what: string, reply: Reply) => race.problems.push(`${race.at}: ${what}: ${show(reply)}`);
  for (const send of race.sends) {
    if (send.reply.status === 202) {
      const accepted = MessageAccepted.safeParse(send.reply.body);
      if (!accepted.success || accepted.data.message_id !== send.message_id || accepted.data.run_status !== 'queued') {
        problem(`send ${send.message_id} was accepted with another message or state`, send.reply);
      }
    } else if (send.reply.status !== 409 || errorCode(send.reply) !== 'thread_busy') {
      problem('a send is 202 accepted or 409 thread_busy', send.reply);
    }
  }
  for (const queue of race.queues) {
    const submission = ControlSubmission.safeParse(queue.reply.body);
    if (queue.reply.status !== 202 || !submission.success) {
      problem('a queue is always 202 with a control', queue.reply);
      continue;
    }
    const { control, run } = submission.data;
    // Applied at once (the thread was idle) with its run, or pending behind the active run.
    const consistent =
      control.kind === 'queue' &&
      control.prompt === queue.prompt &&
      (control.status === 'applied'
        ? run !== null && run.run_id === control.created_run_id && run.message_id === queue.message_id
        : run === null && control.created_run_id === null);
    if (!consistent) problem('queue reply: `run` is set exactly when the control is applied', queue.reply);
  }
  for (const steer of race.steers) {
    if (steer.reply.status === 409) {
      if (errorCode(steer.reply) !== 'no_active_run') problem('a steer is 202 or 409 no_active_run', steer.reply);
      continue;
    }
    const submission = ControlSubmission.safeParse(steer.reply.body);
    if (steer.reply.status !== 202 || !submission.success) {
      problem('a steer is 202 with a control', steer.reply);
      continue;
    }
    const { control, run } = submission.data;
    const consistent =
      control.kind === 'steer' &&
      control.target_run_id !== null &&
      (control.status === 'applied' ? run !== null && run.run_id === control.created_run_id : run === null);
    if (!consistent) problem('steer reply: pending with no run, or applied with the run it admitted', steer.reply);
  }
}

/**
 * Ends every run the race left behind, one at a time, until the thread is idle with nothing
 * pending. Pending controls with no live run are the queue on its way to admitting
 * the next one; if that never happens, the wait times out and names the thread.
 */
export async function drainThread(race: ThreadRace): Promise<void> {
  const threadId = race.thread.id;
  for (;;) {
    const next = await poll(
      `${race.at}: the next queued run, or an empty queue`,
      async () => {
        const live = await liveRunOf(threadId);
        if (live) return { live };
        if ((await controlsOf(threadId, 'pending')).length > 0) return undefined;
        // Nothing pending: idle for good, unless a run was admitted between the two reads.
        const again = await liveRunOf(threadId);
        return again ? { live: again } : { done: true as const };
      },
      60_000,
    );
    if ('done' in next) return;
    if (race.driven.includes(next.live)) {
      race.problems.push(`${race.at}: run ${next.live} is live again after it ended`);
      return;
    }
    try {
      await poll(`${race.at}: the thread to show active with ${next.live} live`, async () => {
        return (await threadOf(threadId)).status === 'active';
      });
    } catch (err) {
      race.problems.push((err as Error).message);
    }
    race.driven.push(next.live);
    // No runner has it: a cancel ends it at once (DESIGN.md section 4), which frees the thread for
    // the next pending control just as any other end would.
    const cancel = await api(user, 'POST', `/v1/runs/${next.live}/cancel`, undefined, { retry: true });
    const cancelled = Run.safeParse(cancel.body).data;
    // 202, or 200 when a retry follows a cancel that went through but was not answered in time.
    if ((cancel.status !== 202 && cancel.status !== 200) || cancelled?.status !== 'cancelled') {
      race.problems.push(`${race.at}: cancelling the queued ${next.live} → ${show(cancel)}`);
      return;
    }
  }
}

/** Every invariant of one raced thread, as the public API shows it once everything has ended. */
export async function threadProblems(race: ThreadRace): Promise<string[]> {
  const { at, thread } = race;
  const problems = [...race.problems];
  const problem = (text: string) => problems.push(`${at}: ${text}`);

  // The raced run ended the way its runner (or its canceller) ended it.
  const first = await runOf(thread.run_id);
  if (first.status !== race.end) problem(`the raced run is ${first.status}, not ${race.end}`);

  // Every run the thread has, from every source the API names one: the creation, accepted sends,
  // the controls that admitted a run, and the live runs the drain found.
  const controls = await controlsOf(thread.id);
  const acceptedSends = race.sends.filter((s) => s.reply.status === 202);
  const sendRuns = acceptedSends.map((s) => MessageAccepted.parse(s.reply.body).run_id);
  const controlRuns = controls.flatMap((c) => (c.created_run_id ? [c.created_run_id] : []));
  const named = [thread.run_id, ...sendRuns, ...controlRuns];
  if (new Set(named).size !== named.length) problem(`a run is named twice: ${named.join(' ')}`);
  const unknownDriven = race.driven.filter((id) => !named.includes(id));
  const neverLive = named.filter((id) => !race.driven.includes(id));
  if (unknownDriven.length) problem(`live runs nothing admitted: ${unknownDriven.join(' ')}`);
  if (neverLive.length) problem(`admitted runs never seen live: ${neverLive.join(' ')}`);

  const runs = await Promise.all([...new Set([...named, ...race.driven])].map(runOf));
  const byId = new Map(runs.map((r) => [r.id, r]));

  // Never two live runs at any moment: in admission order, each run was created no earlier than
  // the previous one ended (both times are the runs service's own clock).
  const ordered = [...runs].sort((a, b) => a.created_at.localeCompare(b.created_at));
  for (const run of ordered) if (!run.terminal) problem(`run ${run.id} is still ${run.status}`);
  for (let i = 1; i < ordered.length; i++) {
    const [prev, next] = [ordered[i - 1]!, ordered[i]!];
    if (!prev.completed_at || prev.completed_at > next.created_at) {
      problem(
        `run ${next.id} was admitted at ${next.created_at} while ${prev.id} was live (ended ${prev.completed_at})`,
      );
    }
  }
  for (const run of runs) {
    const events = await logOf(run.id);
    const log = logProblems(events);
    if (log.length) problem(`log of ${run.id}: ${log.join('; ')}`);
    else if (loggedOutcome(events) !== run.status) {
      problem(`${run.id} is ${run.status} but its log ends ${loggedOutcome(events)}`);
    }
  }

  // Every accepted message was admitted exactly once; a refused one left nothing behind.
  const messages = await messagesOf(thread.id);
  const shown = new Map<string, string[]>();
  for (const m of messages) shown.set(m.id, [...(shown.get(m.id) ?? []), m.parts.map((p) => p.text).join('')]);
  const runMessages = runs.map((r) => r.message_id);
  if (new Set(runMessages).size !== runMessages.length) problem(`two runs for one message: ${runMessages.join(' ')}`);
  for (const [id, texts] of shown) if (texts.length !== 1) problem(`message ${id} is shown ${texts.length} times`);
  const extra = [...shown.keys()].filter((id) => !runMessages.includes(id));
  const missing = runMessages.filter((id) => !shown.has(id));
  if (extra.length) problem(`messages that started no run: ${extra.join(' ')}`);
  if (missing.length) problem(`runs whose message is not shown: ${missing.join(' ')}`);
  for (const send of race.sends) {
    const texts = shown.get(send.message_id);
    if (send.reply.status === 202) {
      const runId = MessageAccepted.parse(send.reply.body).run_id;
      if (byId.get(runId)?.message_id !== send.message_id) problem(`run ${runId} is not the run of ${send.message_id}`);
      if (texts?.[0] !== send.prompt) problem(`accepted send ${send.message_id} shows ${JSON.stringify(texts)}`);
    } else if (send.reply.status === 409 && texts) {
      problem(`refused send ${send.message_id} left its message behind`);
    }
  }

  // Every accepted queue and steer was applied exactly once, by a run of its own.
  const acceptedSteers = race.steers.filter((s) => s.reply.status === 202);
  const expectedControls = [
    ...race.queues.flatMap((q) => ControlSubmission.safeParse(q.reply.body).data?.control.id ?? []),
    ...acceptedSteers.flatMap((s) => ControlSubmission.safeParse(s.reply.body).data?.control.id ?? []),
  ];
  const controlIds = controls.map((c) => c.id);
  if (controlIds.length !== expectedControls.length || !expectedControls.every((id) => controlIds.includes(id))) {
    problem(`controls ${controlIds.join(' ')} are not the accepted ${expectedControls.join(' ')}`);
  }
  for (const control of controls) {
    const run = control.created_run_id ? byId.get(control.created_run_id) : undefined;
    if (control.status !== 'applied' || !run) {
      problem(`control ${control.kind} ${control.id} is ${control.status} with run ${control.created_run_id}`);
    } else if (shown.get(run.message_id)?.[0] !== control.prompt) {
      problem(`run ${run.id} of control ${control.id} shows ${JSON.stringify(shown.get(run.message_id))}`);
    }
  }
  // The run each queue admitted (undefined where checkReplies found the reply wrong already).
  const queueRuns = race.queues.map((queue) => {
    const id = ControlSubmission.safeParse(queue.reply.body).data?.control.id;
    const run = byId.get(controls.find((c) => c.id === id)?.created_run_id ?? '');
    if (run && run.message_id !== queue.message_id) problem(`queue ${queue.message_id} admitted ${run.message_id}`);
    return run;
  });

  // The follow-ups one client queued in turn were admitted in that order.
  for (let i = 1; i < queueRuns.length; i++) {
    const [prev, next] = [queueRuns[i - 1], queueRuns[i]];
    if (prev && next && prev.created_at >= next.created_at) {
      problem(
        `queue ${i} was admitted (${next.id} at ${next.created_at}) before queue ${i - 1} (${prev.id} at ${prev.created_at})`,
      );
    }
  }

  // The thread is idle (its latest run is checked for all threads at once, in latestRunProblems).
  race.last = ordered.at(-1);
  try {
    await poll(`${at}: the thread to be idle`, async () => (await threadOf(thread.id)).status === 'idle');
  } catch (err) {
    problem(`${(err as Error).message} (thread ${thread.id})`);
  }
  return problems;
}

/** The work list shows each thread's last admitted run as its latest, as it ended. */
export async function latestRunProblems(races: ThreadRace[]): Promise<string[]> {
  const mismatches = async () => {
    const latest = new Map((await allWorkThreads()).map((t) => [t.id, t.latest_run]));
    return races.flatMap(({ at, thread, last }) => {
      const shown = latest.get(thread.id);
      return shown?.id === last?.id && shown?.status === last?.status
        ? []
        : [`${at}: the work list shows ${JSON.stringify(shown)} as the latest run, not ${last?.id} (${last?.status})`];
    });
  };
  try {
    await poll('the work list to show every thread’s last run', async () => (await mismatches()).length === 0);
    return [];
  } catch {
    return mismatches();
  }
}

// ---------------------------------------------------------------------------------------------
