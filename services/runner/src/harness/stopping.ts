import type { Logger } from '@threadwork/platform';
import {
  descendantsOf,
  killNamespace,
  signal,
  signalSame,
  stopAllBut,
  type ProcessIdentity,
  type Sweep,
} from './processes.js';

// Stopping a harness process, whichever harness it is: the process, what it started, and the jail
// it is the main process of.

/** A started harness process as stopping it needs it. */
export interface HarnessProcess {
  /** Its pid while it runs. */
  readonly pid: number | undefined;
  readonly hasExited: boolean;
  /** Resolves once it has exited. */
  readonly exited: Promise<unknown>;
  /** SIGKILL to its process group. */
  kill(): void;
}

const STOP_GRACE_MS = 2_000;

/**
 * Asks the harness to exit (SIGTERM to its group), kills it past a grace, kills whatever it had
 * started, then waits for `closed` (its process gone and what it held outside freed) and for the
 * jail (jailInit, null unjailed) to be empty.
 */
export async function stopHarnessProcess(
  proc: HarnessProcess,
  closed: Promise<void>,
  jailInit: ProcessIdentity | null,
  logger: Logger,
): Promise<void> {
  if (!proc.hasExited) {
    const pid = proc.pid;
    // Found before the harness goes: once it has exited, its orphaned commands have a new parent.
    // By identity: by the time the grace below is over, any of them may have exited and its pid be
    // another process's.
    const below = pid === undefined ? [] : descendantsOf(pid);
    if (pid !== undefined) signal(-pid, 'SIGTERM');
    const graceful = await Promise.race([
      proc.exited.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), STOP_GRACE_MS).unref()),
    ]);
    if (!graceful) proc.kill();
    for (const child of below) signalSame(child, 'SIGKILL');
  }
  await closed;
  await jailGone(jailInit, logger);
}

/**
 * Once the harness has exited, the jail's pid namespace is killed and waited for: the outer bwrap
 * may exit before its init has taken every process of the jail with it, and the runner's git must
 * not read the workspace while one of the agent's still runs (a process that forked away from
 * every sweep could swap a file for a link under it).
 */
async function jailGone(jailInit: ProcessIdentity | null, logger: Logger): Promise<void> {
  if (!jailInit || (await killNamespace(jailInit))) return;
  logger.error({ pid: jailInit.pid }, 'the jail’s processes did not all exit when it was killed');
}

/**
 * Kills every process the agent left running, keeping exactly those the harness started with
 * (`own`: the harness, the jail's init, the bridge); nothing while a turn runs.
 */
export function sweepLeftovers(
  proc: HarnessProcess,
  own: readonly ProcessIdentity[],
  jailInit: ProcessIdentity | null,
  turnRunning: boolean,
): Promise<Sweep> {
  const pid = proc.pid;
  if (pid === undefined || proc.hasExited || turnRunning) return Promise.resolve({ processes: [], settled: true });
  return stopAllBut(pid, own, jailInit);
}
