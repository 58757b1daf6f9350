import { describe, expect, it } from 'vitest';
import {
  CreateTaskBody,
  CreateThreadBody,
  ResumableRun,
  Task,
  TaskList,
  TaskWithRun,
  Thread,
  ThreadWithRun,
} from './threads.js';

const at = '2025-05-01T10:00:00.000Z';

const runRef = {
  run_id: 'run_1',
  run_status: 'queued',
  message_id: 'msg_1',
  run_url: '/v1/runs/run_1',
  events_url: '/v1/runs/run_1/events',
};

const thread = {
  id: 'thr_1',
  project_id: 'prj_1',
  name: null,
  status: 'active',
  sandbox_status: 'initializing',
  repohost_url: 'https://github.com/acme/app',
  branch: null,
  harness: 'codex',
  model: 'gpt-5',
  reasoning_effort: 'medium',
  collaboration_mode: 'default',
  created_at: at,
  updated_at: at,
};

describe('CreateTaskBody', () => {
  const minimal = { repository_id: 42, prompt: 'Fix the build' };

  it('accepts the required fields alone and with every optional field', () => {
    expect(CreateTaskBody.parse(minimal)).toEqual(minimal);
    const full = {
      ...minimal,
      model: 'gpt-5',
      harness: 'codex',
      reasoning_effort: 'high',
      client_request_id: 'req-1',
      message_id: 'msg-1',
    };
    expect(CreateTaskBody.parse(full)).toEqual(full);
  });

  it('bounds the prompt to 1..4096', () => {
    expect(CreateTaskBody.safeParse({ ...minimal, prompt: 'x'.repeat(4096) }).success).toBe(true);
    expect(CreateTaskBody.safeParse({ ...minimal, prompt: 'x'.repeat(4097) }).success).toBe(false);
    expect(CreateTaskBody.safeParse({ ...minimal, prompt: '' }).success).toBe(false);
  });

  it.each([0, -1, 1.5, '42', null])('rejects repository_id %j', (repository_id) => {
    expect(CreateTaskBody.safeParse({ ...minimal, repository_id }).success).toBe(false);
  });

  it('requires repository_id and prompt', () => {
    expect(CreateTaskBody.safeParse({ prompt: 'x' }).success).toBe(false);
    expect(CreateTaskBody.safeParse({ repository_id: 1 }).success).toBe(false);
  });

  it('rejects unknown properties, including thread-only ones', () => {
    expect(CreateTaskBody.safeParse({ ...minimal, extra: true }).success).toBe(false);
    expect(CreateTaskBody.safeParse({ ...minimal, collaboration_mode: 'plan' }).success).toBe(false);
  });

  it.each(['model', 'harness', 'reasoning_effort', 'client_request_id', 'message_id'])(
    'bounds %s to 1..256',
    (field) => {
      expect(CreateTaskBody.safeParse({ ...minimal, [field]: 'a'.repeat(256) }).success).toBe(true);
      expect(CreateTaskBody.safeParse({ ...minimal, [field]: 'a'.repeat(257) }).success).toBe(false);
      expect(CreateTaskBody.safeParse({ ...minimal, [field]: '' }).success).toBe(false);
    },
  );
});

describe('CreateThreadBody', () => {
  const minimal = { repository_id: 7, prompt: 'Add a README' };

  it('accepts every documented field', () => {
    const full = {
      ...minimal,
      repository_ids: [8, 9],
      model: 'gpt-5',
      harness: 'codex',
      reasoning_effort: 'low',
      collaboration_mode: 'plan',
      name: 'Docs',
      branch: 'main',
      client_request_id: 'req-2',
      message_id: 'msg-2',
    };
    expect(CreateThreadBody.parse(full)).toEqual(full);
  });

  it('bounds repository_ids to at most 10 positive integers', () => {
    const ten = Array.from({ length: 10 }, (_, i) => i + 1);
    expect(CreateThreadBody.safeParse({ ...minimal, repository_ids: ten }).success).toBe(true);
    expect(CreateThreadBody.safeParse({ ...minimal, repository_ids: [...ten, 11] }).success).toBe(false);
    expect(CreateThreadBody.safeParse({ ...minimal, repository_ids: [0] }).success).toBe(false);
    expect(CreateThreadBody.safeParse({ ...minimal, repository_ids: [2.5] }).success).toBe(false);
  });

  it('rejects bad repository_id, prompt, mode, name and unknown properties', () => {
    expect(CreateThreadBody.safeParse({ ...minimal, repository_id: 0 }).success).toBe(false);
    expect(CreateThreadBody.safeParse({ ...minimal, repository_id: -1 }).success).toBe(false);
    expect(CreateThreadBody.safeParse({ ...minimal, repository_id: 1.5 }).success).toBe(false);
    expect(CreateThreadBody.safeParse({ ...minimal, prompt: 'x'.repeat(4097) }).success).toBe(false);
    expect(CreateThreadBody.safeParse({ ...minimal, prompt: 'x'.repeat(4096) }).success).toBe(true);
    expect(CreateThreadBody.safeParse({ ...minimal, collaboration_mode: 'auto' }).success).toBe(false);
    expect(CreateThreadBody.safeParse({ ...minimal, name: 'n'.repeat(257) }).success).toBe(false);
    expect(CreateThreadBody.safeParse({ ...minimal, branch: '' }).success).toBe(false);
    expect(CreateThreadBody.safeParse({ ...minimal, sandbox: 'local' }).success).toBe(false);
  });
});

describe('Thread', () => {
  it('accepts the contract example and the creation response', () => {
    expect(Thread.parse(thread)).toEqual(thread);
    expect(ThreadWithRun.parse({ ...thread, ...runRef })).toEqual({ ...thread, ...runRef });
  });

  it('carries the latest run when the gateway sends it', () => {
    const withRun = { ...thread, latest_run: { id: 'run_1', status: 'waiting_for_input' } };
    expect(Thread.parse(withRun)).toEqual(withRun);
    expect(Thread.parse({ ...thread, latest_run: null })).toEqual({ ...thread, latest_run: null });
    expect(Thread.safeParse({ ...thread, latest_run: { id: 'run_1', status: 'done' } }).success).toBe(false);
  });

  it('requires nullable fields to be present', () => {
    const { name: _name, ...withoutName } = thread;
    expect(Thread.safeParse(withoutName).success).toBe(false);
  });

  it('rejects a task status and an id of 257 characters', () => {
    expect(Thread.safeParse({ ...thread, status: 'setup' }).success).toBe(false);
    expect(Thread.safeParse({ ...thread, id: 'a'.repeat(257) }).success).toBe(false);
  });

  it('requires the run fields on the creation response', () => {
    expect(ThreadWithRun.safeParse(thread).success).toBe(false);
  });
});

describe('Task', () => {
  const task = { id: 'thr_1', project_id: 'prj_1', status: 'setup', created_at: at };

  it('accepts the required fields alone', () => {
    expect(Task.parse(task)).toEqual(task);
  });

  it('accepts optional fields with messages as a first page', () => {
    const full = {
      ...task,
      name: null,
      sandbox_status: null,
      repohost_url: null,
      branch: 'main',
      messages: [{ id: 'msg_1', role: 'user', parts: [{ type: 'text', text: 'hi' }], created_at: at }],
      updated_at: at,
    };
    expect(Task.parse(full)).toEqual(full);
  });

  it('rejects a thread status and a missing created_at', () => {
    expect(Task.safeParse({ ...task, status: 'active' }).success).toBe(false);
    const { created_at: _createdAt, ...withoutCreatedAt } = task;
    expect(Task.safeParse(withoutCreatedAt).success).toBe(false);
  });

  it('wraps lists and creation responses', () => {
    expect(TaskList.parse({ tasks: [task] })).toEqual({ tasks: [task] });
    expect(TaskWithRun.parse({ ...task, ...runRef })).toEqual({ ...task, ...runRef });
    expect(TaskWithRun.safeParse({ ...task, ...runRef, run_id: '' }).success).toBe(false);
  });

  it('names the resumable run', () => {
    expect(ResumableRun.parse({ run_id: 'run_1' })).toEqual({ run_id: 'run_1' });
    expect(ResumableRun.safeParse({}).success).toBe(false);
  });
});
