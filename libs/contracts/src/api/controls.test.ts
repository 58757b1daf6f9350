import { describe, expect, it } from 'vitest';
import {
  ControlList,
  ControlListQuery,
  ControlSubmission,
  QueueBody,
  RunControl,
  SteerBody,
  TaskControlList,
} from './controls.js';

const at = '2025-05-01T10:00:00.000Z';

const pending = {
  id: 'ctl_1',
  thread_id: 'thr_1',
  kind: 'queue',
  status: 'pending',
  prompt: 'Then update the docs',
  prompt_parts: [{ type: 'text', text: 'Then update the docs' }],
  collaboration_mode: 'default',
  target_run_id: 'run_1',
  created_run_id: null,
  created_at: at,
  applied_at: null,
};

describe('ControlSubmission', () => {
  it('accepts a pending queue control with no run', () => {
    expect(ControlSubmission.parse({ control: pending, run: null })).toEqual({ control: pending, run: null });
  });

  it('accepts an applied control that admitted a run', () => {
    const applied = { ...pending, status: 'applied', created_run_id: 'run_2', applied_at: at };
    const run = {
      run_id: 'run_2',
      run_status: 'queued',
      message_id: 'msg_2',
      run_url: '/v1/runs/run_2',
      events_url: '/v1/runs/run_2/events',
    };
    expect(ControlSubmission.parse({ control: applied, run })).toEqual({ control: applied, run });
  });

  it('requires run to be present and rejects unknown kinds and statuses', () => {
    expect(ControlSubmission.safeParse({ control: pending }).success).toBe(false);
    expect(RunControl.safeParse({ ...pending, kind: 'cancel' }).success).toBe(false);
    expect(RunControl.safeParse({ ...pending, status: 'done' }).success).toBe(false);
  });
});

describe('control lists', () => {
  it('use thread_id in the thread vocabulary and task_id in the task vocabulary', () => {
    expect(ControlList.parse({ controls: [pending] })).toEqual({ controls: [pending] });
    const { thread_id, ...rest } = pending;
    const taskControl = { ...rest, task_id: thread_id };
    expect(TaskControlList.parse({ controls: [taskControl] })).toEqual({ controls: [taskControl] });
    expect(TaskControlList.safeParse({ controls: [pending] }).success).toBe(false);
  });

  it('filter by an optional control status', () => {
    expect(ControlListQuery.parse({})).toEqual({});
    expect(ControlListQuery.parse({ status: 'pending' })).toEqual({ status: 'pending' });
    expect(ControlListQuery.safeParse({ status: 'queued' }).success).toBe(false);
  });
});

describe('QueueBody and SteerBody', () => {
  it('accept the contract fields, with the ids optional', () => {
    const queue = { prompt: 'next', client_request_id: 'req', message_id: 'msg', collaboration_mode: 'plan' };
    expect(QueueBody.parse(queue)).toEqual(queue);
    expect(QueueBody.parse({ prompt: 'next' })).toEqual({ prompt: 'next' });
    expect(SteerBody.parse({ prompt: 'focus on tests', client_request_id: 'req' })).toEqual({
      prompt: 'focus on tests',
      client_request_id: 'req',
    });
  });

  it('bound prompts to 1..4096 and reject unknown properties', () => {
    for (const Body of [QueueBody, SteerBody]) {
      expect(Body.safeParse({ prompt: '' }).success).toBe(false);
      expect(Body.safeParse({ prompt: 'x'.repeat(4097) }).success).toBe(false);
      expect(Body.safeParse({ prompt: 'x'.repeat(4096) }).success).toBe(true);
      expect(Body.safeParse({ prompt: 'x', extra: 1 }).success).toBe(false);
    }
    expect(SteerBody.safeParse({ prompt: 'x', message_id: 'm' }).success).toBe(false);
    expect(QueueBody.safeParse({ prompt: 'x', client_request_id: 'r'.repeat(257) }).success).toBe(false);
  });
});
