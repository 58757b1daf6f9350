import type { DiskOverrun } from '../domain/outcome.js';
import { DiskMeasureError, SandboxTakenError, type DiskUsage, type Sandbox } from '../sandbox/provider.js';
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
 * Measures a failed measurement again, after a pause, before it counts: a process of the jail in
 * the middle of a large write may not stop for the freeze in time on a machine busy with I/O, or
 * `du` may be cut off, and a run is not to fail for that. An agent that makes the measure fail
 * keeps it failing: every attempt fails and the run stops all the same, a second or so later.
 */
const MEASURE_RETRY_MS = [250, 1_000];

async function measure(run: RunState, sandbox: Sandbox): Promise<DiskUsage> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await run.deps.sandboxes.diskUsage(sandbox, run.session?.pid);
    } catch (err) {
      const pause = MEASURE_RETRY_MS[attempt];
      if (!(err instanceof DiskMeasureError) || pause === undefined || run.turnEnded || run.stopReason) throw err;
      run.log.warn({ err, attempt: attempt + 1 }, 'the sandbox could not be measured on disk; measuring it again');
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/**
 * Stops the turn once the sandbox holds more than SANDBOX_DISK_MAX_BYTES or SANDBOX_DISK_MAX_INODES
 * (measured while a turn runs, what its jail holds unlinked included), or cannot be measured (in
 * several attempts): a measure the agent could make fail would be no bound at all.
 */
export async function checkDisk(run: RunState): Promise<void> {
  const sandbox = run.sandbox;
  if (!sandbox || !run.turnStarted || run.turnEnded || run.stopReason || run.measuringDisk) return;
  run.measuringDisk = true;
  try {
    let over: DiskOverrun | null;
    const max = diskMax(run);
    try {
      const used = await measure(run, sandbox);
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
