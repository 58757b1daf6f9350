import { describe, expect, it } from 'vitest';
import { firstSequenceFrom, Run, RunEventPage, RunEventsQuery, RunEventsStreamQuery } from './runs.js';

const at = '2025-05-01T10:00:00.000Z';

const run = {
  id: 'run_1',
  thread_id: 'thr_1',
  project_id: 'prj_1',
  message_id: 'msg_1',
  status: 'queued',
  attempt: 0,
  harness: 'codex',
  model: 'gpt-5',
  reasoning_effort: 'medium',
  collaboration_mode: 'default',
  sandbox_id: null,
  error: null,
  usage: null,
  created_at: at,
  updated_at: at,
  started_at: null,
  completed_at: null,
  terminal: false,
};

describe('Run', () => {
  it('accepts a queued run and a failed one with error and usage', () => {
    expect(Run.parse(run)).toEqual(run);
    const failed = {
      ...run,
      status: 'failed',
      attempt: 2,
      sandbox_id: 'sbx_1',
      error: { code: 'runner_lost', message: 'no runner left', detail: 'max_attempts spent' },
      usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
      started_at: at,
      completed_at: at,
      terminal: true,
    };
    expect(Run.parse(failed)).toEqual(failed);
    expect(Run.parse({ ...failed, usage: {}, error: { code: 'x', message: 'y' } }).usage).toEqual({});
  });

  it('rejects negative and fractional attempts, unknown statuses and absent nullable fields', () => {
    expect(Run.safeParse({ ...run, attempt: -1 }).success).toBe(false);
    expect(Run.safeParse({ ...run, attempt: 0.5 }).success).toBe(false);
    expect(Run.safeParse({ ...run, status: 'done' }).success).toBe(false);
    const { error: _error, ...withoutError } = run;
    expect(Run.safeParse(withoutError).success).toBe(false);
    expect(Run.safeParse({ ...run, error: { code: 'x' } }).success).toBe(false);
  });
});

describe('RunEventPage', () => {
  it('accepts events with any JSON chunk', () => {
    const page = {
      events: [
        { sequence: 1, chunk: { type: 'run.status', status: 'running' }, created_at: at },
        { sequence: 2, chunk: { type: 'some.future.type', anything: [1, 'two'] }, created_at: at },
      ],
      next_sequence: 3,
      status: 'running',
      terminal: false,
      error: null,
    };
    expect(RunEventPage.parse(page)).toEqual(page);
  });

  it('rejects sequence 0 and a missing error field', () => {
    const page = { events: [], next_sequence: 1, status: 'completed', terminal: true, error: null };
    expect(RunEventPage.safeParse({ ...page, next_sequence: 0 }).success).toBe(false);
    expect(RunEventPage.safeParse({ ...page, events: [{ sequence: 0, chunk: null, created_at: at }] }).success).toBe(
      false,
    );
    const { error: _error, ...withoutError } = page;
    expect(RunEventPage.safeParse(withoutError).success).toBe(false);
  });
});

describe('RunEventsQuery', () => {
  it('defaults to from 1, limit 100, wait 0', () => {
    expect(RunEventsQuery.parse({})).toEqual({ from: 1, limit: 100, wait: 0 });
  });

  it('coerces query strings', () => {
    expect(RunEventsQuery.parse({ from: '5', limit: '5', wait: '2.5' })).toEqual({ from: 5, limit: 5, wait: 2.5 });
  });

  it('reads from=0 (before the first sequence) as the start of the log', () => {
    expect(RunEventsQuery.parse({ from: '0' })).toEqual({ from: 0, limit: 100, wait: 0 });
    expect(firstSequenceFrom(0)).toBe(1);
    expect(firstSequenceFrom(7)).toBe(7);
    expect(RunEventsQuery.parse({ from: '' })).toEqual({ from: 1, limit: 100, wait: 0 });
  });

  it('rejects limit 0 and 1001, negative or fractional from, wait over 30 and negative wait', () => {
    expect(RunEventsQuery.safeParse({ limit: '1000' }).success).toBe(true);
    expect(RunEventsQuery.safeParse({ limit: '1001' }).success).toBe(false);
    expect(RunEventsQuery.safeParse({ limit: '0' }).success).toBe(false);
    expect(RunEventsQuery.safeParse({ from: '-1' }).success).toBe(false);
    expect(RunEventsQuery.safeParse({ from: '1.5' }).success).toBe(false);
    expect(RunEventsQuery.safeParse({ wait: '30' }).success).toBe(true);
    expect(RunEventsQuery.safeParse({ wait: '31' }).success).toBe(false);
    expect(RunEventsQuery.safeParse({ wait: '-1' }).success).toBe(false);
  });

  it('leaves the stream query from optional', () => {
    expect(RunEventsStreamQuery.parse({})).toEqual({});
    expect(RunEventsStreamQuery.parse({ from: '9' })).toEqual({ from: 9 });
    expect(RunEventsStreamQuery.parse({ from: '0' })).toEqual({ from: 0 });
    expect(RunEventsStreamQuery.safeParse({ from: '-1' }).success).toBe(false);
  });
});
