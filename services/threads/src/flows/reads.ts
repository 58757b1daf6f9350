import {
  MESSAGE_PAGE_LIMIT_DEFAULT,
  THREAD_PAGE_BYTES_MAX,
  type ControlList,
  type ControlStatus,
  type MessagePage,
  type Task,
  type TaskControlList,
  type TaskList,
  type Thread,
  type ThreadProject,
  type View,
  type WorkList,
  type WorkThread,
} from '@threadwork/contracts';
import { notFound } from '@threadwork/platform';
import { decodeCursor, encodeCursor } from '../domain/cursor.js';
import { fitPage } from '../domain/limits.js';
import { isRecorded, type ProjectRecord, type RecordedThread } from '../store/records.js';
import { controlView, messageView, projectView, taskView, threadView, workThreadView } from '../domain/views.js';
import type { Deps } from './deps.js';
import { latestRun, ownedThread } from './owned.js';

async function page(
  { store }: Deps,
  thread: RecordedThread,
  cursor: string | undefined,
  limit: number,
): Promise<MessagePage> {
  const after = cursor === undefined ? undefined : decodeCursor(cursor);
  // One more than asked tells whether a further page exists without a second query.
  const found = await store.messagePage(thread._id, after, limit + 1);
  const shown = found.slice(0, limit);
  const last = shown[shown.length - 1];
  return {
    messages: shown.map(messageView),
    next_cursor: found.length > limit && last ? encodeCursor({ createdAt: last.created_at, id: last._id }) : null,
  };
}

/** threads.get: the thread, or the task with the first page of its messages. */
export async function getThread(
  deps: Deps,
  { owner_id, thread_id, view }: { owner_id: string; thread_id: string; view: View },
): Promise<Thread | Task> {
  const thread = await ownedThread(deps, owner_id, thread_id, view);
  const latest = await latestRun(deps, thread);
  if (view === 'thread') return threadView(thread, latest);
  const { messages } = await page(deps, thread, undefined, MESSAGE_PAGE_LIMIT_DEFAULT);
  return taskView(thread, latest, messages);
}

/** Bytes of `value` as JSON, the way the reply carries it, with the comma after it. */
const jsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value)) + 1;
/** What a page's items may add up to: the page size less room for the reply's own fields and envelope. */
const ITEMS_BYTES_MAX = THREAD_PAGE_BYTES_MAX - 1024;

interface PageRequest {
  owner_id: string;
  cursor?: string | undefined;
  limit: number;
}

/**
 * The next `limit + 1` of the owner's shown threads, newest first, with their latest runs (the one
 * past `limit` only tells whether a further page exists).
 */
async function threadsAfter(deps: Deps, { owner_id: ownerId, cursor, limit }: PageRequest) {
  const after = cursor === undefined ? undefined : decodeCursor(cursor);
  const found = await deps.store.threadPage(ownerId, after, limit + 1);
  const runs = await deps.peers.getRuns(
    ownerId,
    found.flatMap((thread) => (thread.latest_run_id ? [thread.latest_run_id] : [])),
  );
  return found.map((thread) => ({
    thread,
    latest: (thread.latest_run_id && runs.get(thread.latest_run_id)) || null,
  }));
}

/** The cursor after the `taken` first of `found`, or null when they were all of them. */
function nextCursor(found: readonly { thread: { created_at: Date; _id: string } }[], taken: number): string | null {
  const last = found[taken - 1];
  return taken < found.length && last ? encodeCursor({ createdAt: last.thread.created_at, id: last.thread._id }) : null;
}

/**
 * threads.list: a page of the owner's tasks, newest first: at most `limit`, and fewer when they
 * would pass THREAD_PAGE_BYTES_MAX, so the reply always fits in one NATS message.
 */
export async function listTasks(deps: Deps, req: PageRequest): Promise<TaskList> {
  const found = await threadsAfter(deps, req);
  const tasks = found.map(({ thread, latest }) => (isRecorded(thread) ? taskView(thread, latest) : null));
  const taken = fitPage(tasks, req.limit, ITEMS_BYTES_MAX, (task) => (task ? jsonBytes(task) : 0));
  return {
    tasks: tasks.slice(0, taken).flatMap((task) => (task ? [task] : [])),
    next_cursor: nextCursor(found, taken),
  };
}

/**
 * threads.work: a page of the owner's threads, newest first, under their projects (in the order
 * of their newest thread on the page). Paged by thread, so a project with any number of threads
 * costs a page no more than its threads on it; a project whose threads span pages is on each of
 * them. Bounded like listTasks, a project's own fields counted once per page.
 */
export async function workList(deps: Deps, req: PageRequest): Promise<WorkList> {
  const found = await threadsAfter(deps, req);
  const projectIds = [...new Set(found.map(({ thread }) => thread.project_id))];
  const projects = new Map(
    (await deps.store.projectsByIds(req.owner_id, projectIds)).map((project) => [project._id, project]),
  );
  const shown = found.map(({ thread, latest }) => {
    const project = projects.get(thread.project_id);
    return project && isRecorded(thread) ? { project, thread: workThreadView(thread, latest) } : null;
  });
  const onPage = new Set<string>();
  const taken = fitPage(shown, req.limit, ITEMS_BYTES_MAX, (item) => {
    if (!item) return 0;
    const header = onPage.has(item.project._id) ? 0 : jsonBytes(projectView(item.project, []));
    onPage.add(item.project._id);
    return header + jsonBytes(item.thread);
  });
  const grouped = new Map<string, { project: ProjectRecord; threads: WorkThread[] }>();
  for (const item of shown.slice(0, taken)) {
    if (!item) continue;
    const group = grouped.get(item.project._id) ?? { project: item.project, threads: [] };
    group.threads.push(item.thread);
    grouped.set(item.project._id, group);
  }
  return {
    projects: [...grouped.values()].map(({ project, threads }) => projectView(project, threads)),
    next_cursor: nextCursor(found, taken),
  };
}

/** threads.project: the project of one of the owner's threads, with its repositories (for review). */
export async function threadProject(
  deps: Deps,
  { owner_id, thread_id }: { owner_id: string; thread_id: string },
): Promise<ThreadProject> {
  const thread = await ownedThread(deps, owner_id, thread_id, 'thread');
  const project = await deps.store.getProject(thread.project_id);
  if (!project) throw notFound('thread');
  return { thread_id: thread._id, project_id: project._id, repositories: projectView(project, []).repositories };
}

/** threads.resumable: the thread's live run, which a client reconnects to. */
export async function resumableRun(
  deps: Deps,
  { owner_id, thread_id }: { owner_id: string; thread_id: string },
): Promise<{ run: { run_id: string } | null }> {
  const thread = await ownedThread(deps, owner_id, thread_id, 'task');
  const live = await deps.peers.liveRun(owner_id, thread._id);
  return { run: live ? { run_id: live.id } : null };
}

/** threads.messages: a page of shown messages, oldest first. */
export async function listMessages(
  deps: Deps,
  { owner_id, thread_id, cursor, limit }: { owner_id: string; thread_id: string; cursor?: string; limit: number },
): Promise<MessagePage> {
  const thread = await ownedThread(deps, owner_id, thread_id, 'thread');
  return page(deps, thread, cursor, limit);
}

/** threads.controls: the thread's controls, oldest first, optionally of one status. */
export async function listControls(
  deps: Deps,
  { owner_id, thread_id, view, status }: { owner_id: string; thread_id: string; view: View; status?: ControlStatus },
): Promise<ControlList | TaskControlList> {
  const thread = await ownedThread(deps, owner_id, thread_id, view);
  const controls = await deps.store.listControls(thread._id, status);
  if (view === 'task') {
    return { controls: controls.map((control) => controlView(control, 'task')) };
  }
  return { controls: controls.map((control) => controlView(control, 'thread')) };
}
