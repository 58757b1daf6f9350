import type {
  LatestRun,
  Message,
  Project,
  RunControl,
  RunRef,
  RunState,
  RunStatus,
  Task,
  TaskRunControl,
  Thread,
  View,
  WorkThread,
} from '@threadwork/contracts';
import type { ControlRecord, MessageRecord, ProjectRecord, RecordedThread, ThreadRecord } from '../store/records.js';
import { taskStatus, threadStatus } from './status.js';

export function runRef(run: { id: string; status: RunStatus; message_id: string }): RunRef {
  return {
    run_id: run.id,
    run_status: run.status,
    message_id: run.message_id,
    run_url: `/v1/runs/${run.id}`,
    events_url: `/v1/runs/${run.id}/events`,
  };
}

export function threadView(thread: RecordedThread, latest: RunState | null): Thread {
  return {
    id: thread._id,
    project_id: thread.project_id,
    name: thread.name,
    status: threadStatus(latest?.status ?? null),
    sandbox_status: thread.sandbox_status,
    repohost_url: thread.repohost_url,
    branch: thread.branch,
    harness: thread.harness,
    model: thread.model,
    reasoning_effort: thread.reasoning_effort,
    collaboration_mode: thread.collaboration_mode,
    latest_run: latest ? { id: latest.id, status: latest.status } : null,
    created_at: thread.created_at.toISOString(),
    updated_at: thread.updated_at.toISOString(),
  };
}

export function taskView(thread: RecordedThread, latest: RunState | null, messages?: Message[]): Task {
  return {
    id: thread._id,
    project_id: thread.project_id,
    name: thread.name,
    status: taskStatus({
      latestRun: latest ? { status: latest.status, first: latest.id === thread.first_run_id } : null,
      sandboxStatus: thread.sandbox_status,
    }),
    sandbox_status: thread.sandbox_status,
    repohost_url: thread.repohost_url,
    branch: thread.branch,
    ...(messages ? { messages } : {}),
    created_at: thread.created_at.toISOString(),
    updated_at: thread.updated_at.toISOString(),
  };
}

/** Lines changed across the thread's repositories, or null before any run produced a candidate. */
export function changedLines(
  thread: Pick<ThreadRecord, 'candidate_stats'>,
): { additions: number; deletions: number } | null {
  const stats = Object.values(thread.candidate_stats ?? {});
  if (stats.length === 0) return null;
  return stats.reduce(
    (sum, s) => ({ additions: sum.additions + s.additions, deletions: sum.deletions + s.deletions }),
    { additions: 0, deletions: 0 },
  );
}

/** `additions`/`deletions` stay out until a candidate reports them; `sandbox_status` until the first report. */
export function workThreadView(thread: RecordedThread, latest: RunState | null): WorkThread {
  const latestRun: LatestRun | null = latest ? { id: latest.id, status: latest.status } : null;
  const changed = changedLines(thread);
  return {
    id: thread._id,
    project_id: thread.project_id,
    status: threadStatus(latest?.status ?? null),
    prompt: thread.prompt,
    harness: thread.harness,
    model: thread.model,
    reasoning_effort: thread.reasoning_effort,
    collaboration_mode: thread.collaboration_mode,
    ...(thread.sandbox_status ? { sandbox_status: thread.sandbox_status } : {}),
    ...(changed ?? {}),
    latest_run: latestRun,
    created_at: thread.created_at.toISOString(),
    updated_at: thread.updated_at.toISOString(),
  };
}

export function projectView(project: ProjectRecord, threads: WorkThread[]): Project {
  const primary = project.repositories[0];
  if (!primary) throw new Error(`project ${project._id} has no repositories`);
  return {
    id: project._id,
    name: project.name,
    repository: primary.full_name,
    branch: primary.branch,
    repositories: project.repositories.map(({ id, repository_id, full_name, branch }) => ({
      id,
      repository_id,
      full_name,
      branch,
    })),
    threads,
  };
}

export function messageView(message: MessageRecord): Message {
  return {
    id: message.message_id,
    role: message.role,
    parts: message.parts.map(({ type, text }) => ({ type, text })),
    created_at: message.created_at.toISOString(),
  };
}

/** The task vocabulary names the owning thread `task_id`. */
export function controlView(control: ControlRecord, view: 'thread'): RunControl;
export function controlView(control: ControlRecord, view: 'task'): TaskRunControl;
export function controlView(control: ControlRecord, view: View): RunControl | TaskRunControl {
  const fields = {
    id: control._id,
    kind: control.kind,
    status: control.status,
    prompt: control.prompt,
    prompt_parts: control.prompt_parts.map(({ type, text }) => ({ type, text })),
    collaboration_mode: control.collaboration_mode,
    target_run_id: control.target_run_id,
    created_run_id: control.created_run_id,
    created_at: control.created_at.toISOString(),
    applied_at: control.applied_at?.toISOString() ?? null,
  };
  return view === 'task' ? { ...fields, task_id: control.thread_id } : { ...fields, thread_id: control.thread_id };
}
