import {
  findHarness,
  harnessCatalog,
  subjects,
  unservedHarness,
  type AdmitRequest,
  type RunTicket,
} from '@threadwork/contracts';
import {
  activeTraceId,
  AppError,
  invalidRequest,
  isDuplicateKeyError,
  publishJson,
  unavailable,
} from '@threadwork/platform';
import { newId } from '../domain/ids.js';
import type { RunDoc, SlotDoc } from '../store/runs.js';
import { subjectOrInvalid, type RunsContext } from './context.js';
import { announceMove } from './announce.js';
import { settleIfTerminal } from './finish.js';

// Admission: at most one live run per thread, decided by inserting the thread's next slot
// (`thread_slots`, `_id: <thread>:<generation>`, see SlotDoc). The writes go in an order a crash and a retry with the same
// admission key converge on:
//   1. the slot (carrying the admission key, so a retry recognises it as its own);
//   2. the run, with a fixed id (a retry inserting it again finds it);
//   3. the queued `run.status` event, the job on RUN_JOBS and the DOMAIN event, each deduplicated
//      by its Nats-Msg-Id;
//   4. the run_admissions marker, after which a retry publishes nothing again (the job must not
//      be duplicated once the dedupe window has passed: a second job would be taken for a
//      redelivery and bump the attempt of a healthy run).

const SLOT_TRIES = 5;

export async function admitRun(ctx: RunsContext, req: AdmitRequest): Promise<{ run: RunDoc; created: boolean }> {
  // Only the harness is checked here: threads checks a new thread's model and effort against the
  // catalog, and a follow-up on an older thread keeps what it was created with even if the catalog
  // has narrowed since.
  const catalog = harnessCatalog(ctx.config);
  const harness = req.harness ?? catalog.default_harness;
  const entry = findHarness(catalog, harness);
  if (!entry) throw invalidRequest(unservedHarness(catalog));
  subjectOrInvalid(() => subjects.runJobs(harness));
  if (req.run_id !== undefined) subjectOrInvalid(() => subjects.runEvents(req.run_id as string));

  // Read together: most admissions are new, and then the thread's latest slot is read anyway.
  const [existing, latest] = await Promise.all([
    ctx.store.runOfAdmission(req.admission_key),
    ctx.store.latestSlot(req.thread_id),
  ]);
  if (existing) return { run: await completeAdmission(ctx, existing), created: false };

  const runId = await takeSlot(ctx, req.thread_id, req.run_id ?? newId('run'), req.admission_key, latest);
  const now = new Date();
  const doc: RunDoc = {
    _id: runId,
    owner_id: req.owner_id,
    thread_id: req.thread_id,
    project_id: req.project_id,
    message_id: req.message_id,
    admission_key: req.admission_key,
    prompt: req.prompt,
    repositories: req.repositories,
    status: 'queued',
    previous_status: null,
    status_key: 'status:0:queued',
    attempt: 0,
    transitions: 0,
    harness,
    model: req.model ?? entry.default_model,
    reasoning_effort: req.reasoning_effort ?? entry.default_reasoning_effort,
    collaboration_mode: req.collaboration_mode ?? 'default',
    runner_id: null,
    sandbox_id: null,
    error: null,
    usage: null,
    created_at: now,
    updated_at: now,
    started_at: null,
    completed_at: null,
    terminal: false,
    // The trace of the request that admitted the run: an operator looking at a run finds its
    // trace (HTTP → services → runner → harness) by this id.
    trace_id: activeTraceId(),
  };
  try {
    await ctx.store.insertRun(doc);
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    const run = await adoptExisting(ctx, req, runId);
    return { run: await completeAdmission(ctx, run), created: false };
  }
  ctx.logger.info({ run_id: runId, thread_id: req.thread_id }, 'run admitted');
  return { run: await completeAdmission(ctx, doc, { written: true }), created: true };
}

/**
 * The run insert collided: with the run this admission (or its concurrent twin) already wrote,
 * which is fine, or with a run of another admission that happens to have the pre-chosen id.
 */
async function adoptExisting(ctx: RunsContext, req: AdmitRequest, runId: string): Promise<RunDoc> {
  const [byKey, byId] = await Promise.all([ctx.store.runOfAdmission(req.admission_key), ctx.store.run(runId)]);
  if (byKey) return byKey;
  // The slot just taken names a run that will never be written: it is freed as an orphan.
  if (byId) throw new AppError('idempotency_conflict', `run ${runId} already exists for another admission`);
  throw unavailable(`run ${runId} could not be written; try again`);
}

/**
 * Takes the thread's next slot for `runId`, or returns the run id the same admission put in the
 * latest slot before. The next generation may be taken when the latest slot's run has ended, or
 * names a run that was never written (its admission died) and is older than ORPHAN_SLOT_AFTER_MS;
 * two admissions taking the same generation race on the insert, and the loser looks again.
 * `first` is the latest slot as the caller has just read it (null: none).
 */
async function takeSlot(
  ctx: RunsContext,
  threadId: string,
  runId: string,
  admissionKey: string,
  first: SlotDoc | null,
): Promise<string> {
  for (let i = 0; i < SLOT_TRIES; i++) {
    const latest = i === 0 ? first : await ctx.store.latestSlot(threadId);
    if (latest) {
      if (latest.admission_key === admissionKey) return latest.run_id;
      const holder = await ctx.store.run(latest.run_id);
      const free = holder
        ? holder.terminal || (await settleIfTerminal(ctx, holder))
        : Date.now() - latest.created_at.getTime() > ctx.config.ORPHAN_SLOT_AFTER_MS;
      if (!free) {
        throw new AppError('thread_busy', `thread ${threadId} already has a live run`, {
          details: { active_run_id: latest.run_id },
        });
      }
      if (!holder)
        ctx.logger.warn(
          { thread_id: threadId, run_id: latest.run_id },
          'passing over the slot of an admission that died',
        );
    }
    const generation = (latest?.generation ?? 0) + 1;
    try {
      await ctx.store.insertSlot({
        _id: `${threadId}:${generation}`,
        thread_id: threadId,
        generation,
        run_id: runId,
        admission_key: admissionKey,
        created_at: new Date(),
      });
      return runId;
    } catch (err) {
      if (!isDuplicateKeyError(err)) throw err;
    }
  }
  throw unavailable(`the live run of thread ${threadId} kept changing; try again`);
}

/**
 * Step 3 and 4 above, for a run still waiting in the queue; returns the run as it stands. The mark
 * is not looked for when this admission has just `written` the run: only a twin racing it can have
 * marked it, moments ago, well within the job's dedupe window.
 */
async function completeAdmission(ctx: RunsContext, run: RunDoc, { written = false } = {}): Promise<RunDoc> {
  if (run.status !== 'queued' || run.terminal) return run;
  if (!written && (await ctx.store.admitted(run._id))) return run;
  await announceMove(ctx, run);
  try {
    await publishJson(
      ctx.js,
      subjects.runJobs(run.harness),
      { run_id: run._id, thread_id: run.thread_id } satisfies RunTicket,
      {
        msgId: run._id,
      },
    );
  } catch (err) {
    throw unavailable('RUN_JOBS stream unavailable', err);
  }
  await ctx.store.markAdmitted(run._id, new Date());
  return run;
}
