import type { DiskOverrun } from '../domain/outcome.js';
import { SandboxTakenError, type DiskUsage } from '../sandbox/provider.js';
import type { RunState } from './run-state.js';

// The sandbox's bound on disk, watched while a turn runs (every SANDBOX_DISK_CHECK_MS).

/** Which bound the sandbox went past; the bytes bound when none was found (yet). */
export function overrun(run: RunState): DiskOverrun {
  return run.diskOverrun ?? { bytes: run.deps.config.SANDBOX_DISK_MAX_BYTES };
}

export function diskMax(run: RunState): DiskUsage {
  return { bytes: run.deps.config.SANDBOX_DISK_MAX_BYTES, inodes: run.deps.config.SANDBOX_DISK_MAX_INODES };
}

/**
 * Stops the turn once the sandbox holds more than SANDBOX_DISK_MAX_BYTES or SANDBOX_DISK_MAX_INODES
 * (measured while a turn runs, what its jail holds unlinked included), or cannot be measured: a
 * measure the agent could make fail would be no bound at all.
 */
export async function checkDisk(run: RunState): Promise<void> {
  const sandbox = run.sandbox;
  if (!sandbox || !run.turnStarted || run.turnEnded || run.stopReason || run.measuringDisk) return;
  run.measuringDisk = true;
  try {
    let over: DiskOverrun | null;
    const max = diskMax(run);
    try {
      const used = await run.deps.sandboxes.diskUsage(sandbox, run.session?.pid);
      over = used.bytes > max.bytes ? { bytes: max.bytes } : used.inodes > max.inodes ? { inodes: max.inodes } : null;
      if (over) {
        run.log.warn(
          { used_bytes: used.bytes, used_inodes: used.inodes, max_bytes: max.bytes, max_inodes: max.inodes },
          'the sandbox grew past its bound on disk; stopping the run',
        );
      }
    } catch (err) {
      // Whatever failed (du, a process of the jail that could not be read, the sandbox gone), it went unmeasured.
      over = { unmeasured: true };
      run.log.error({ err }, 'the sandbox could not be measured on disk; stopping the run as past its bound');
    }
    if (!over || run.stopReason) return;
    run.diskOverrun = over;
    await run.deps.sandboxes.outgrown(sandbox).catch((err: unknown) => {
      if (err instanceof SandboxTakenError) throw err;
      run.log.warn({ err }, 'the outgrown sandbox could not be marked to be rebuilt');
    });
    run.stop('disk_full');
  } catch (err) {
    if (err instanceof SandboxTakenError) return;
    run.log.warn({ err }, 'the sandbox’s use of disk could not be checked');
  } finally {
    run.measuringDisk = false;
  }
}
