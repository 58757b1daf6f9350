import {
  isTerminalRunStatus,
  type RunStatus,
  type SandboxStatus,
  type TaskStatus,
  type ThreadStatus,
} from '@threadwork/contracts';
import { assertNever } from '@threadwork/platform';

/** A live run (queued … cancelling) holds the thread's one live-run slot. */
export function isLiveRunStatus(status: RunStatus): boolean {
  return !isTerminalRunStatus(status);
}

/** Thread vocabulary: `active` while the thread's latest run is live, `idle` otherwise. */
export function threadStatus(latestRunStatus: RunStatus | null): ThreadStatus {
  return latestRunStatus !== null && isLiveRunStatus(latestRunStatus) ? 'active' : 'idle';
}

export interface TaskStatusInput {
  /** The thread's latest run as runs reports it now; `first` when it is the run the thread was created with. */
  latestRun: { status: RunStatus; first: boolean } | null;
  sandboxStatus: SandboxStatus | null;
}

/**
 * Task vocabulary (DESIGN.md section 4): the run state folded into one status. `setup` covers the
 * first run until the runner reports the sandbox ready; a later run rebuilding a reclaimed sandbox
 * is plain `running`, because the task was set up once already.
 */
export function taskStatus({ latestRun, sandboxStatus }: TaskStatusInput): TaskStatus {
  // No run yet: creation has not finished admitting the first one.
  if (latestRun === null) return 'setup';
  const status = latestRun.status;
  switch (status) {
    case 'queued':
    case 'starting':
    case 'running':
      return latestRun.first && sandboxStatus !== 'ready' ? 'setup' : 'running';
    case 'waiting_for_input':
      return 'waiting';
    // Still holds the thread until the harness stops; the outcome shows once it is `cancelled`.
    case 'cancelling':
      return 'running';
    case 'completed':
      return 'ready';
    case 'failed':
      return 'failed';
    case 'cancelled':
      return 'cancelled';
    default:
      return assertNever(status, 'run status');
  }
}
