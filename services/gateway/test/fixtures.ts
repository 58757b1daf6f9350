import type {
  Interaction,
  Repository,
  Run,
  RunControl,
  RunEvent,
  RunRef,
  RunStatus,
  Task,
  Thread,
} from '@threadwork/contracts';

// Data builders for the in-test doubles: every object is a valid contract shape.

export const now = () => new Date().toISOString();

export function runRef(runId: string, messageId = `msg_${runId}`): RunRef {
  return {
    run_id: runId,
    run_status: 'queued',
    message_id: messageId,
    run_url: `/v1/runs/${runId}`,
    events_url: `/v1/runs/${runId}/events`,
  };
}

export function thread(id: string, status: Thread['status'] = 'active'): Thread {
  const at = now();
  return {
    id,
    project_id: `prj_${id}`,
    name: null,
    status,
    sandbox_status: 'initializing',
    repohost_url: 'https://example.test/local/app',
    branch: `threadwork/${id}`,
    harness: 'codex',
    model: 'gpt-test',
    reasoning_effort: 'medium',
    collaboration_mode: 'default',
    created_at: at,
    updated_at: at,
  };
}

export function task(id: string): Task {
  const at = now();
  return {
    id,
    project_id: `prj_${id}`,
    name: null,
    status: 'setup',
    sandbox_status: 'initializing',
    repohost_url: 'https://example.test/local/app',
    branch: `threadwork/${id}`,
    messages: [],
    created_at: at,
    updated_at: at,
  };
}

export function run(id: string, threadId: string, status: RunStatus = 'running'): Run {
  const at = now();
  const terminal = status === 'completed' || status === 'failed' || status === 'cancelled';
  return {
    id,
    thread_id: threadId,
    project_id: `prj_${threadId}`,
    message_id: `msg_${id}`,
    status,
    attempt: 0,
    harness: 'codex',
    model: 'gpt-test',
    reasoning_effort: 'medium',
    collaboration_mode: 'default',
    sandbox_id: null,
    error: null,
    usage: null,
    created_at: at,
    updated_at: at,
    started_at: at,
    completed_at: terminal ? at : null,
    terminal,
  };
}

export function control(id: string, threadId: string, kind: RunControl['kind'], prompt: string): RunControl {
  return {
    id,
    thread_id: threadId,
    kind,
    status: 'pending',
    prompt,
    prompt_parts: [{ type: 'text', text: prompt }],
    collaboration_mode: 'default',
    target_run_id: null,
    created_run_id: null,
    created_at: now(),
    applied_at: null,
  };
}

export function interaction(id: string, runId: string, threadId: string): Interaction {
  return {
    id,
    run_id: runId,
    thread_id: threadId,
    kind: 'question',
    status: 'pending',
    questions: [
      {
        id: 'q1',
        header: 'File',
        question: 'Which file should I change?',
        isOther: false,
        isSecret: false,
        options: [
          { label: 'README.md', description: 'the readme' },
          { label: 'NOTES.md', description: 'the notes' },
        ],
      },
    ],
    answers: {},
    created_at: now(),
    resolvedAt: null,
    cancelledBy: null,
  };
}

export function repository(id: number, name: string): Repository {
  return {
    repository_id: id,
    installation_id: 1,
    owner: 'local',
    name,
    full_name: `local/${name}`,
    url: `file:///srv/repos/${name}.git`,
    avatar_url: 'data:image/svg+xml,x',
    private: true,
    default_branch: 'main',
  };
}

export function event(sequence: number, chunk: Record<string, unknown>): RunEvent {
  return { sequence, chunk, created_at: now() };
}
