import {
  RUN_STATUSES,
  SANDBOX_STATUSES,
  type RunStatus,
  type SandboxStatus,
  type TaskStatus,
} from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import { isLiveRunStatus, taskStatus, threadStatus } from './status.js';

const LIVE: RunStatus[] = ['queued', 'starting', 'running', 'waiting_for_input', 'cancelling'];
const SANDBOX: (SandboxStatus | null)[] = [null, ...SANDBOX_STATUSES];

describe('thread status', () => {
  it.each(RUN_STATUSES)('is active exactly while the latest run is live (%s)', (status) => {
    expect(isLiveRunStatus(status)).toBe(LIVE.includes(status));
    expect(threadStatus(status)).toBe(LIVE.includes(status) ? 'active' : 'idle');
  });

  it('is idle without a run', () => {
    expect(threadStatus(null)).toBe('idle');
  });
});

describe('task status', () => {
  // Every (run status, first run?, sandbox status) combination, with the answer DESIGN.md section 4 gives.
  function expected(status: RunStatus, first: boolean, sandbox: SandboxStatus | null): TaskStatus {
    if (status === 'completed') return 'ready';
    if (status === 'failed') return 'failed';
    if (status === 'cancelled') return 'cancelled';
    if (status === 'waiting_for_input') return 'waiting';
    if (status === 'cancelling') return 'running';
    return first && sandbox !== 'ready' ? 'setup' : 'running';
  }

  const cases = RUN_STATUSES.flatMap((status) =>
    [true, false].flatMap((first) => SANDBOX.map((sandbox) => [status, first, sandbox] as const)),
  );

  it.each(cases)('run %s (first: %s, sandbox: %s)', (status, first, sandbox) => {
    expect(taskStatus({ latestRun: { status, first }, sandboxStatus: sandbox })).toBe(expected(status, first, sandbox));
  });

  it('is setup while the first run waits for its sandbox and running once it is ready', () => {
    expect(taskStatus({ latestRun: { status: 'queued', first: true }, sandboxStatus: null })).toBe('setup');
    expect(taskStatus({ latestRun: { status: 'starting', first: true }, sandboxStatus: 'initializing' })).toBe('setup');
    expect(taskStatus({ latestRun: { status: 'running', first: true }, sandboxStatus: 'ready' })).toBe('running');
  });

  it('does not go back to setup when a later run rebuilds a reclaimed sandbox', () => {
    expect(taskStatus({ latestRun: { status: 'starting', first: false }, sandboxStatus: 'initializing' })).toBe(
      'running',
    );
  });

  it('is ready after a completed run and keeps the outcome of a failed or cancelled one', () => {
    expect(taskStatus({ latestRun: { status: 'completed', first: false }, sandboxStatus: 'stopped' })).toBe('ready');
    expect(taskStatus({ latestRun: { status: 'failed', first: true }, sandboxStatus: 'failed' })).toBe('failed');
    expect(taskStatus({ latestRun: { status: 'cancelled', first: true }, sandboxStatus: null })).toBe('cancelled');
  });

  it('is waiting while an interaction is pending', () => {
    expect(taskStatus({ latestRun: { status: 'waiting_for_input', first: true }, sandboxStatus: 'ready' })).toBe(
      'waiting',
    );
  });

  it('is setup before any run was admitted', () => {
    expect(taskStatus({ latestRun: null, sandboxStatus: null })).toBe('setup');
  });
});
