import { describe, expect, it } from 'vitest';
import {
  CancelledBy,
  CollaborationMode,
  ConnectionStatus,
  RUN_STATUSES,
  RunStatus,
  TERMINAL_RUN_STATUSES,
  TaskStatus,
  ThreadStatus,
  isTerminalRunStatus,
} from './values.js';

describe('run status', () => {
  it('has the eight states of the lifecycle', () => {
    expect(RUN_STATUSES).toEqual([
      'queued',
      'starting',
      'running',
      'waiting_for_input',
      'cancelling',
      'completed',
      'failed',
      'cancelled',
    ]);
  });

  it('is terminal exactly for completed, failed and cancelled', () => {
    expect(RUN_STATUSES.filter(isTerminalRunStatus)).toEqual(['completed', 'failed', 'cancelled']);
    expect([...TERMINAL_RUN_STATUSES]).toEqual(['completed', 'failed', 'cancelled']);
    expect(isTerminalRunStatus('cancelling')).toBe(false);
    expect(isTerminalRunStatus('waiting_for_input')).toBe(false);
  });

  it('rejects values outside the set', () => {
    expect(RunStatus.safeParse('done').success).toBe(false);
  });
});

describe('value sets', () => {
  it('accept the contract example values', () => {
    expect(ThreadStatus.parse('active')).toBe('active');
    expect(TaskStatus.parse('setup')).toBe('setup');
    expect(CollaborationMode.parse('default')).toBe('default');
    expect(CancelledBy.parse('user')).toBe('user');
    expect(ConnectionStatus.parse('ready')).toBe('ready');
  });

  it('reject unknown values', () => {
    expect(CollaborationMode.safeParse('auto').success).toBe(false);
    expect(ThreadStatus.safeParse('setup').success).toBe(false);
    expect(TaskStatus.safeParse('active').success).toBe(false);
  });
});
