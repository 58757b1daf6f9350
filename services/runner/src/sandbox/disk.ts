import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { promisify } from 'node:util';
import { descendants, signal, startTime } from '../harness/processes.js';

// What a sandbox holds on disk, measured so that the agent cannot hide from it (SANDBOX_DISK_MAX_BYTES
// and SANDBOX_DISK_MAX_INODES).
//
// A quota of the filesystem's own would count everything the kernel charges, and nothing could
// hide from it; but none is there to be had without root and a disk set up for it: ext4 and XFS
// user or project quotas need root to set and a mount option, a loop or FUSE image per sandbox
// needs root or /dev/fuse, and the one bounded filesystem an unprivileged runner may mount, a
// tmpfs with size= and nr_inodes=, is memory and dies with the jail while a sandbox outlives its
// runs. So the sandbox is measured, and every way the agent had of slipping past the measure is closed:
//
// - The tree: blocks in use (`du -B1`: a sparse file counts for what it takes) and inodes
//   (`du --inodes`, millions of empty files take no blocks but do exhaust the disk), on the
//   sandbox's filesystem only (-x). `du` failing in any way — a directory it cannot read, a path
//   it chokes on, a timeout on a tree too large to walk in time — is a failed measurement, which the
//   run treats as past the bound: an agent that could make the measure fail would have no bound.
// - While it runs, the jail is frozen (SIGSTOP on each of its processes, swept until no new one
//   appears, then SIGCONT on exactly those): a tree renamed under the walk, or files made and
//   removed as it goes, would otherwise be missed or make it fail at random. A freeze that does not
//   settle (processes still appearing after its last look, one that does not stop) is a failed
//   measurement: a chain of processes that fork and exit could otherwise stay ahead of it.
// - Files unlinked while open, or mapped and unlinked, take space that no walk sees until their
//   last holder goes: each process of the jail is looked at (`/proc/<pid>/fd`, `/proc/<pid>/map_files`)
//   and every file there with no link left, on the sandbox's filesystem, counts once (by inode).
//   Where the runner may not read `map_files` (it takes CAP_SYS_ADMIN) a deleted file mapped on that
//   filesystem cannot be measured, and the measurement fails.
//
// Not seen: a file descriptor in flight in a unix socket's queue (sent and never received) or
// registered with io_uring holds its file outside any process's tables. Such space lasts no longer
// than the jail, which goes with the turn that was stopped, timed out or ended.
//
// The jail's processes are the harness process's descendants: in a jail with its own pid namespace
// an orphan is re-parented to the jail's init, so none escapes the walk; unjailed, one that
// re-parents to the machine's init is not seen.

const execFileAsync = promisify(execFile);

/** A walk that takes longer is a failed measurement (the tree is too large to bound in time). */
const DU_TIMEOUT_MS = 60_000;
/**
 * How long a frozen process may take to stop before the measurement fails. A stop lands when the
 * process is next scheduled, which on a loaded machine can take seconds; the wait costs the agent
 * nothing but time, since its processes stand still meanwhile.
 */
const STOP_WAIT_MS = 10_000;

export interface DiskUsage {
  bytes: number;
  inodes: number;
}

/** The sandbox could not be measured: treated as past its bound. */
export class DiskMeasureError extends Error {
  override name = 'DiskMeasureError';
}

/**
 * What `dir` holds on disk now, and what the processes below `jailRoot` hold there unlinked; the
 * jail is frozen while it is measured. Throws DiskMeasureError when it cannot be measured whole.
 */
export async function measureDisk(dir: string, jailRoot?: number): Promise<DiskUsage> {
  const frozen = jailRoot === undefined ? [] : await freeze(jailRoot);
  try {
    const bytes = await du(dir, ['-B1']);
    const inodes = await du(dir, ['--inodes']);
    // Every process of the jail now, not only those frozen: freeze() made sure they are the same.
    const held = heldUnlinked(statSync(dir).dev, jailRoot === undefined ? [] : descendants(jailRoot));
    return { bytes: bytes + held.bytes, inodes: inodes + held.inodes };
  } finally {
    thaw(frozen);
  }
}

/** One figure of `du -s -x` (bytes or inodes), or DiskMeasureError for anything but a clean walk. */
async function du(dir: string, unit: string[]): Promise<number> {
  let stdout: string;
  try {
    ({ stdout } = await execFileAsync('du', ['-s', '-x', ...unit, '--', dir], {
      timeout: DU_TIMEOUT_MS,
      killSignal: 'SIGKILL',
      // Its messages in one language, whatever the machine's.
      env: { ...process.env, LC_ALL: 'C' },
      maxBuffer: 1024 * 1024,
    }));
  } catch (err) {
    const e = err as { stderr?: string; killed?: boolean; code?: unknown; message: string };
    const why = e.killed ? `took longer than ${DU_TIMEOUT_MS} ms` : (e.stderr?.trim() || e.message).slice(0, 500);
    throw new DiskMeasureError(`du ${unit.join(' ')} failed: ${why}`, { cause: err });
  }
  const figure = Number(stdout.split('\t')[0]);
  if (!Number.isSafeInteger(figure) || figure < 0) {
    throw new DiskMeasureError(`du ${unit.join(' ')} answered ${JSON.stringify(stdout.slice(0, 100))}`);
  }
  return figure;
}

interface Frozen {
  pid: number;
  started: string;
}

/** Rounds of looking and freezing after which a jail still starting processes counts as unmeasurable. */
const FREEZE_ROUNDS = 200;

/**
 * The processes below `root`, each stopped; swept again until a look finds no new one. Fails
 * (DiskMeasureError) when it does not settle: new processes still appearing after FREEZE_ROUNDS
 * looks, or one not stopped in time. A process left running could hold a deleted file the measure
 * does not see (passed down a chain of processes that fork and exit faster than the looks), or
 * change the tree under the walk.
 */
async function freeze(root: number): Promise<Frozen[]> {
  const frozen: Frozen[] = [];
  const seen = new Set<number>();
  for (let round = 0; round < FREEZE_ROUNDS; round++) {
    const found = descendants(root).filter((pid) => !seen.has(pid));
    if (found.length === 0) {
      // A stop takes effect when the process is next scheduled: once each is stopped, one more
      // look finds any child made just before.
      if (!(await untilStopped(frozen))) {
        thaw(frozen);
        throw new DiskMeasureError('a process of the jail did not stop for the measure');
      }
      if (descendants(root).every((pid) => seen.has(pid))) return frozen;
      continue;
    }
    for (const pid of found) {
      seen.add(pid);
      const started = startTime(pid);
      if (started === null) continue;
      signal(pid, 'SIGSTOP');
      frozen.push({ pid, started });
    }
  }
  thaw(frozen);
  throw new DiskMeasureError(`the jail was still starting processes after ${FREEZE_ROUNDS} looks`);
}

/**
 * Until every frozen process is stopped or gone, for up to STOP_WAIT_MS (one in uninterruptible I/O
 * stops as that ends); false when one still was not.
 */
async function untilStopped(frozen: readonly Frozen[]): Promise<boolean> {
  const until = Date.now() + STOP_WAIT_MS;
  while (!frozen.every((p) => stoppedOrGone(p.pid))) {
    if (Date.now() >= until) return false;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return true;
}

function stoppedOrGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'T' || state === 't' || state === 'Z' || state === 'X';
  } catch {
    return true;
  }
}

/** Lets the frozen processes go on: those, not a later process that took a pid of theirs. */
function thaw(frozen: readonly Frozen[]): void {
  for (const p of frozen) if (startTime(p.pid) === p.started) signal(p.pid, 'SIGCONT');
}

/**
 * Blocks and inodes of the files with no link left on filesystem `dev` that `pids` hold open or
 * mapped, each file once.
 */
export function heldUnlinked(dev: number, pids: readonly number[]): DiskUsage {
  const counted = new Set<number>();
  let bytes = 0;
  const count = (path: string): 'ok' | 'denied' => {
    let st;
    try {
      st = statSync(path);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      // Closed, unmapped or exited meanwhile: nothing held.
      if (code === 'EPERM' || code === 'EACCES') return 'denied';
      return 'ok';
    }
    if (st.dev !== dev || st.nlink !== 0 || counted.has(st.ino)) return 'ok';
    counted.add(st.ino);
    bytes += st.blocks * 512;
    return 'ok';
  };
  for (const pid of pids) {
    for (const fd of entries(`/proc/${pid}/fd`)) {
      if (count(`/proc/${pid}/fd/${fd}`) === 'denied') {
        throw new DiskMeasureError(`the files process ${pid} of the jail holds cannot be read`);
      }
    }
    for (const range of entries(`/proc/${pid}/map_files`)) {
      if (count(`/proc/${pid}/map_files/${range}`) === 'denied' && mapsDeletedOn(pid, dev)) {
        throw new DiskMeasureError(`process ${pid} of the jail maps a deleted file the runner may not measure`);
      }
    }
  }
  return { bytes, inodes: counted.size };
}

/** The names in a directory of /proc; none when the process is gone. */
function entries(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EPERM' || code === 'EACCES') throw new DiskMeasureError(`${dir} cannot be read`, { cause: err });
    return [];
  }
}

/** Whether a process maps a file of filesystem `dev` that is deleted, as `/proc/<pid>/maps` tells. */
function mapsDeletedOn(pid: number, dev: number): boolean {
  let maps: string;
  try {
    maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
  } catch {
    return false;
  }
  // `maj:min` in hex, as the kernel encodes a dev_t (new_encode_dev).
  const major = ((dev >> 8) & 0xfff) | (Math.floor(dev / 2 ** 32) & ~0xfff);
  const minor = (dev & 0xff) | ((dev >> 12) & ~0xff);
  const ours = `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}`;
  return maps.split('\n').some((line) => {
    const fields = line.split(/\s+/);
    return fields[3] === ours && fields[4] !== '0' && line.endsWith(' (deleted)');
  });
}
