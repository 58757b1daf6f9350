import {
  MESSAGE_PAGE_LIMIT_DEFAULT,
  type ControlList,
  type ControlStatus,
  type MessagePage,
  type Task,
  type TaskControlList,
  type TaskList,
  type Thread,
  type View,
  type WorkList,
} from '@threadwork/contracts';
import { decodeMessageCursor, encodeMessageCursor } from '../domain/cursor.js';
import { isRecorded, type RecordedThread } from '../domain/records.js';
import { controlView, messageView, projectView, taskView, threadView, workThreadView } from '../domain/views.js';
import { latestRun, ownedThread, type Deps } from './admission.js';

async function page(
  { store }: Deps,
  thread: RecordedThread,
  cursor: string | undefined,
  limit: number,
): Promise<MessagePage> {
  const after = cursor === undefined ? undefined : decodeMessageCursor(cursor);
  // One more than asked tells whether a further page exists without a second query.
  const found = await store.messagePage(thread._id, after, limit + 1);
  const shown = found.slice(0, limit);
  const last = shown[shown.length - 1];
  return {
    messages: shown.map(messageView),
    next_cursor:
      found.length > limit && last ? encodeMessageCursor({ createdAt: last.created_at, id: last._id }) : null,
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

async function visibleThreads(deps: Deps, ownerId: string) {
  const threads = (await deps.store.listThreads(ownerId)).filter(isRecorded);
  const runs = await deps.peers.getRuns(
    ownerId,
    threads.map((thread) => thread.latest_run_id),
  );
  return threads.map((thread) => ({ thread, latest: runs.get(thread.latest_run_id) ?? null }));
}

/** threads.list: the owner's tasks, newest first. */
export async function listTasks(deps: Deps, { owner_id }: { owner_id: string }): Promise<TaskList> {
  const threads = await visibleThreads(deps, owner_id);
  return { tasks: threads.map(({ thread, latest }) => taskView(thread, latest)) };
}

/** threads.work: the owner's projects, newest first, each with its threads newest first. */
export async function workList(deps: Deps, { owner_id }: { owner_id: string }): Promise<WorkList> {
  const [projects, threads] = await Promise.all([deps.store.listProjects(owner_id), visibleThreads(deps, owner_id)]);
  return {
    projects: projects.map((project) =>
      projectView(
        project,
        threads
          .filter(({ thread }) => thread.project_id === project._id)
          .map(({ thread, latest }) => workThreadView(thread, latest)),
      ),
    ),
  };
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
