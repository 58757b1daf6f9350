import { readdirSync, readFileSync } from 'node:fs';

// A harness runs commands in sessions of their own (a PTY per command), outside its process
// group, so stopping it by group misses them. Its descendants are found by walking parent ids in
// /proc and killed by pid. Where there is no /proc the list is empty and the group kill is all.

/** The fields of `/proc/<pid>/stat` after the parenthesised name (the state first); null when unreadable. */
function statFields(pid: number | string): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}

/** Parent pid of each process, from `/proc/<pid>/stat` (the field after the parenthesised name). */
function parentIds(): Map<number, number> {
  const parents = new Map<number, number>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return parents;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    // Null when it exited while we looked.
    const fields = statFields(entry);
    if (fields) parents.set(Number(entry), Number(fields[1]));
  }
  return parents;
}

/** Every process below `pid`, children first then theirs. */
export function descendants(pid: number): number[] {
  return descendantsIn(parentIds(), pid);
}

/** Every process below `pid` by the parent ids of one look at /proc (`parentIds`). */
function descendantsIn(parents: ReadonlyMap<number, number>, pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const [child, parent] of parents) {
    const list = children.get(parent) ?? [];
    list.push(child);
    children.set(parent, list);
  }
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift() as number) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

/** A process's command line, its arguments joined by spaces; null when it is gone. */
export function commandLine(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0+$/, '').replaceAll('\0', ' ');
  } catch {
    return null;
  }
}

/**
 * What runs below `root` besides `keep` and the processes between `root` and them: the processes
 * to stop to leave only those running.
 */
export function besides(root: number, keep: (pid: number) => boolean): number[] {
  // One look at /proc for both: a sweep looks many times, each a read of every process on the machine.
  const parents = parentIds();
  const below = descendantsIn(parents, root);
  const kept = new Set<number>([root]);
  for (const pid of below) {
    if (!keep(pid)) continue;
    // The process and its ancestors up to root (a jail's init, the shell that became the harness).
    for (let p: number | undefined = pid; p !== undefined && p !== root && !kept.has(p); p = parents.get(p))
      kept.add(p);
  }
  return below.filter((pid) => !kept.has(pid));
}

/** A process as of now: its pid and start time, which together a reused pid cannot fake. */
export interface ProcessIdentity {
  pid: number;
  started: string;
}

/** `root` and every process below it now, by identity (the processes a harness started with). */
export function processesOf(root: number): ProcessIdentity[] {
  return identities([root, ...descendants(root)]);
}

/** Every process below `root` now, by identity: what to signal later, once their pids may be another's. */
export function descendantsOf(root: number): ProcessIdentity[] {
  return identities(descendants(root));
}

function identities(pids: readonly number[]): ProcessIdentity[] {
  return pids.flatMap((pid) => {
    const started = startTime(pid);
    return started === null ? [] : [{ pid, started }];
  });
}

/**
 * Signals a process found earlier only if it is still that process: once it has exited, its pid
 * may be given to another, unrelated one, which a signal by number would reach. Its start time is
 * read just before the signal; between the two the pid would have to be freed and handed out again
 * (the whole pid space gone round), which a process that is frozen or about to be killed cannot
 * make happen itself. True when signalled.
 */
export function signalSame(target: ProcessIdentity, sig: NodeJS.Signals): boolean {
  if (startTime(target.pid) !== target.started) return false;
  signal(target.pid, sig);
  return true;
}

/** What a sweep stopped, and whether it settled: false when the jail must be killed whole instead. */
export interface Sweep {
  /** The command lines of the processes it killed. */
  processes: string[];
  /**
   * Whether, once it was over, repeated looks found nothing below `root` but the kept processes.
   * False when new processes were still appearing at the round cap, a killed one did not go, or a
   * look after the kill still found one: a process that forks and exits at once can stay ahead of
   * every look, and one the sweep missed must not go on beside the runner's own work.
   */
  settled: boolean;
}

/** Looks in a row that must find nothing but the kept processes before a sweep counts as settled. */
const QUIET_LOOKS = 5;
/** How long the frozen processes may take to stop, and the killed ones to go, before the sweep counts as unsettled. */
const SETTLE_WAIT_MS = 5_000;

/**
 * Stops every process below `root` but the `kept` ones (and those between `root` and them), and
 * answers what they ran and whether that settled. Each found is frozen (SIGSTOP) before the next
 * look, so a process that forks and exits, or starts another as it goes, cannot stay ahead of the
 * sweep; once a look finds no new one, all are killed. Only exact identities are kept: no name or
 * command line, which the agent could take on, spares a process.
 *
 * A look lists /proc, then reads each process found: a process that forks and exits at once is gone
 * by the time it is read, and its child was not there to be listed, so a look can find nothing while
 * such a chain goes on. In a jail, its pid namespace's `init` (one of the kept) is therefore stopped
 * for the sweep: the processes that exit below it then stay as zombies, unreaped, and every look
 * sees the chain. A look counts as quiet only when it lists the same processes as the one before
 * and each of them is kept, frozen and stopped, or exited; without an init to stop (no jail) a
 * chain escapes to the machine's init anyway.
 */
export async function stopAllBut(
  root: number,
  kept: readonly ProcessIdentity[],
  init: ProcessIdentity | null = null,
  maxRounds = 200,
): Promise<Sweep> {
  const keep = (pid: number) => kept.some((k) => k.pid === pid && startTime(pid) === k.started);
  const frozen: ProcessIdentity[] = [];
  const lines: string[] = [];
  const isFrozen = (pid: number) => frozen.some((f) => f.pid === pid && startTime(pid) === f.started);
  let quiet = false;
  if (init) signalSame(init, 'SIGSTOP');
  try {
    let before = '';
    for (let round = 0; round < maxRounds && !quiet; round++) {
      const listed = besides(root, keep);
      const found = identities(listed.filter((pid) => !isFrozen(pid)));
      for (const target of found) {
        if (!signalSame(target, 'SIGSTOP')) continue;
        frozen.push(target);
        lines.push(commandLine(target.pid) ?? String(target.pid));
      }
      const now = [...listed].sort((a, b) => a - b).join(',');
      if (found.length === 0 && now === before) {
        // A stop takes effect when the process is next scheduled: one frozen in the middle of a
        // fork may still make a child, which the next look finds.
        if (!(await untilStopped(frozen))) break;
        quiet = now === [...besides(root, keep)].sort((a, b) => a - b).join(',');
      }
      before = now;
    }
    // By identity: a frozen process can still be killed by another (of the agent's) before this.
    for (const target of frozen) signalSame(target, 'SIGKILL');
  } finally {
    if (init) signalSame(init, 'SIGCONT');
  }
  const processes = lines.filter((line) => line !== '');
  if (!quiet) return { processes, settled: false };
  const deadline = Date.now() + SETTLE_WAIT_MS;
  while (frozen.some((f) => startTime(f.pid) === f.started)) {
    if (Date.now() > deadline) return { processes, settled: false };
    await pause(10);
  }
  // Nothing but the kept, in several looks apart.
  for (let look = 0; look < QUIET_LOOKS; look++) {
    if (besides(root, keep).some((pid) => startTime(pid) !== null)) return { processes, settled: false };
    await pause(5);
  }
  return { processes, settled: true };
}

/** Until every frozen process is stopped or has exited; false when one still runs after SETTLE_WAIT_MS. */
async function untilStopped(frozen: readonly ProcessIdentity[]): Promise<boolean> {
  const deadline = Date.now() + SETTLE_WAIT_MS;
  while (frozen.some((f) => !stoppedOrGone(f))) {
    if (Date.now() > deadline) return false;
    await pause(5);
  }
  return true;
}

function stoppedOrGone(target: ProcessIdentity): boolean {
  if (startTime(target.pid) !== target.started) return true;
  const state = statFields(target.pid)?.[0];
  return state === undefined || state === 'T' || state === 't';
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The init of the pid namespace `pid` is in, when that is not the machine's: the process there
 * with pid 1 (`NSpid` of `/proc/<pid>/status` ends in 1), looked for among `pid` and what is below it.
 */
export function namespaceInit(candidates: readonly ProcessIdentity[]): ProcessIdentity | null {
  for (const candidate of candidates) {
    try {
      const status = readFileSync(`/proc/${candidate.pid}/status`, 'utf8');
      const ids = /^NSpid:\s+(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/) ?? [];
      if (ids.length > 1 && ids[ids.length - 1] === '1') return candidate;
    } catch {
      // Gone.
    }
  }
  return null;
}

/**
 * Kills a jail whole: its pid namespace's init, after which the kernel kills every process left in
 * the namespace and the init is reaped only once they are all gone. Waits (up to `timeoutMs`) for
 * that; true once it is so.
 */
export async function killNamespace(init: ProcessIdentity, timeoutMs = 10_000): Promise<boolean> {
  signalSame(init, 'SIGKILL');
  const deadline = Date.now() + timeoutMs;
  while (startTime(init.pid) === init.started) {
    if (Date.now() > deadline) return false;
    await pause(10);
  }
  return true;
}

/**
 * Resident memory of a process in bytes: all of it (`VmRSS`) and the part that is its own
 * (`RssAnon`; the rest is mostly the binary's pages, shared between processes). Null when unreadable.
 */
export function residentMemory(pid: number): { rss: number; anon: number } | null {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (field: string) =>
      Number(new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, 'm').exec(status)?.[1] ?? NaN) * 1024;
    const rss = kib('VmRSS');
    return Number.isNaN(rss) ? null : { rss, anon: kib('RssAnon') };
  } catch {
    return null;
  }
}

export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Already gone.
  }
}

/**
 * When a running process started (`/proc/<pid>/stat` field 22, clock ticks since boot): with the
 * pid, an identity that a reused pid cannot fake. Null when the process is gone or has exited and
 * awaits its parent (a zombie), or where there is no /proc.
 */
export function startTime(pid: number): string | null {
  const fields = statFields(pid);
  if (!fields || fields[0] === 'Z' || fields[0] === 'X') return null;
  return fields[19] ?? null;
}

/**
 * Kills a process, its process group and every process below it, then waits (up to `timeoutMs`)
 * until it has exited. SIGKILL, because the process may be stopped (SIGSTOP, a frozen container)
 * and then handles nothing else; an exited process has released its files and locks even while
 * its parent has yet to reap it. False if it was still there at the deadline.
 */
export async function killTree(pid: number, timeoutMs = 5_000): Promise<boolean> {
  // Found first: once it has exited, its orphaned commands have a new parent.
  const below = descendantsOf(pid);
  signal(-pid, 'SIGKILL');
  signal(pid, 'SIGKILL');
  for (const child of below) signalSame(child, 'SIGKILL');
  const deadline = Date.now() + timeoutMs;
  while (startTime(pid) !== null) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}
