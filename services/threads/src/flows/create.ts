import {
  harnessChoiceProblem,
  type CreateThreadBody,
  type HostedRepository,
  type Run,
  type Task,
  type TaskWithRun,
  type Thread,
  type ThreadWithRun,
  type View,
} from '@threadwork/contracts';
import { invalidRequest } from '@threadwork/platform';
import { messageAdmissionKey, requestHash, requestKey } from '../domain/idempotency.js';
import { newId } from '../domain/ids.js';
import {
  baseBranches,
  inRequestedOrder,
  orderedRepositoryIds,
  projectKey,
  projectName,
  projectRepositories,
  runRepositories,
} from '../domain/project.js';
import { isRecorded, type RecordedThread } from '../store/records.js';
import { runRef, taskView, threadView } from '../domain/views.js';
import { admitWithMessage, recordRun } from './admission.js';
import type { Deps } from './deps.js';
import { checkLiveRuns, checkThreadRate, withinLimits } from './limits.js';

interface CreateIds extends Record<string, string> {
  thread_id: string;
  message_id: string;
  run_id: string;
}

/**
 * threads.create (POST /v1/threads and POST /v1/tasks). With a client_request_id the ids are
 * fixed by the first caller's idempotency record, and every caller with the same body then runs
 * the same keyed steps with them (insert-if-absent, admission by key), so any number of
 * concurrent or repeated creates converge on one thread, one message and one run — even when the
 * first one stopped half-way.
 *
 * The per-user limits (threads a minute, live runs) are checked before the first write, one of the
 * user's creations and sends at a time (withinLimits), so a refused create leaves nothing behind.
 */
export async function createThread(
  deps: Deps,
  { owner_id: ownerId, view, body }: { owner_id: string; view: View; body: CreateThreadBody },
): Promise<ThreadWithRun | TaskWithRun> {
  const { peers } = deps;
  // Refused before anything is written: a job for a harness no runner serves would wait for good,
  // and a model or effort its harness does not take would fail the run only once a runner has it.
  const problem = harnessChoiceProblem(deps.harnesses, body, 'body.');
  if (problem) throw invalidRequest(problem);
  const repositoryIds = orderedRepositoryIds(body);
  const repositories = inRequestedOrder(repositoryIds, await peers.access(ownerId, repositoryIds));
  const key = body.client_request_id ? requestKey(ownerId, 'create', body.client_request_id) : null;
  return withinLimits(
    deps,
    ownerId,
    key,
    async () => {
      await checkThreadRate(deps, ownerId);
      await checkLiveRuns(deps, ownerId);
    },
    () => writeAndAdmit(deps, { ownerId, view, body, repositoryIds, repositories, key }),
  );
}

async function writeAndAdmit(
  deps: Deps,
  {
    ownerId,
    view,
    body,
    repositoryIds,
    repositories,
    key,
  }: {
    ownerId: string;
    view: View;
    body: CreateThreadBody;
    repositoryIds: number[];
    repositories: HostedRepository[];
    key: string | null;
  },
): Promise<ThreadWithRun | TaskWithRun> {
  const { store, peers } = deps;
  const candidate: CreateIds = {
    thread_id: newId('thr'),
    message_id: body.message_id ?? newId('msg'),
    run_id: newId('run'),
  };
  const ids = key ? await store.claimRequest(key, ownerId, requestHash(body), candidate) : candidate;

  const branches = baseBranches(repositories, body.branch);
  const [primary] = repositories;
  const [primaryBranch] = branches;
  if (!primary || primaryBranch === undefined) throw new Error('a thread needs a primary repository');
  const now = new Date();
  const project = await store.findOrCreateProject({
    _id: newId('prj'),
    owner_id: ownerId,
    key: projectKey(ownerId, repositoryIds),
    name: projectName(repositories),
    repositories: projectRepositories(repositories, branches, () => newId('prr')),
    created_at: now,
  });

  await store.insertThreadIfAbsent({
    _id: ids.thread_id,
    owner_id: ownerId,
    project_id: project._id,
    name: body.name ?? null,
    prompt: body.prompt,
    harness: body.harness ?? null,
    model: body.model ?? null,
    reasoning_effort: body.reasoning_effort ?? null,
    collaboration_mode: body.collaboration_mode ?? null,
    branch: primaryBranch,
    repohost_url: primary.url,
    repositories: runRepositories(project.repositories, repositories, branches),
    first_run_id: ids.run_id,
    latest_run_id: null,
    latest_run_created_at: null,
    sandbox_status: null,
    sandbox_status_at: null,
    created_at: now,
    updated_at: now,
  });
  // Whoever inserted it, admit with what is stored, so every caller sends runs the same request.
  const stored = await store.getThread(ids.thread_id);
  if (!stored) throw new Error(`thread ${ids.thread_id} vanished after insert`);

  const run = await admitWithMessage(deps, stored, {
    message_id: ids.message_id,
    run_id: ids.run_id,
    prompt: stored.prompt,
    admission_key: messageAdmissionKey(stored._id, ids.message_id),
  });

  const thread = await recordedThread(deps, ids.thread_id, run);
  // A replay long after the fact: the thread may have moved on to later runs.
  const latest = thread.latest_run_id === run.id ? run : await peers.getRun(ownerId, thread.latest_run_id);
  const ref = runRef(run);
  if (view === 'task') {
    const task: Task = taskView(thread, latest);
    return { ...task, ...ref };
  }
  const shown: Thread = threadView(thread, latest);
  return { ...shown, ...ref };
}

const RECORD_TRIES = 3;

/**
 * The thread with its admitted run recorded. A write to the thread racing the admission (its
 * sandbox status, once a runner picks the run up at once) can, on a server that applies updates as
 * read-then-replace (FerretDB), put back the document as it was before the run was recorded; the
 * run's next status event would repair it, but this caller needs it now, so it records the run
 * again (idempotent) and looks once more.
 */
async function recordedThread(deps: Deps, threadId: string, run: Run): Promise<RecordedThread> {
  for (let i = 0; ; i++) {
    const thread = await deps.store.getThread(threadId);
    if (thread && isRecorded(thread)) return thread;
    if (!thread || i + 1 >= RECORD_TRIES) throw new Error(`thread ${threadId} not recorded after admission`);
    await recordRun(deps, run);
  }
}
