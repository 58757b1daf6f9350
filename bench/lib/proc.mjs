// What /proc says about processes: resident memory and CPU time (Linux only; elsewhere the
// figures are null).
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux on every common architecture). */
const TICKS_PER_SECOND = 100;

/** User + system CPU seconds a process has used so far, or null once it is gone. */
export function cpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // utime and stime are fields 14 and 15; counting resumes after the parenthesised command name.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return null;
  }
}

/** CPU seconds of each process (name → pid) from now until the returned function is called. */
export function cpuMeter(pids) {
  const start = new Map([...pids].map(([name, pid]) => [name, cpuSeconds(pid)]));
  return () =>
    new Map(
      [...pids].map(([name, pid]) => {
        const [before, after] = [start.get(name), cpuSeconds(pid)];
        return [name, before === null || after === null ? null : after - before];
      }),
    );
}

/**
 * `VmRSS` (all resident pages) and `RssAnon` (the process's own: heap, stacks; the rest is mostly
 * file-backed pages such as the binary's, shared with other processes), in bytes; null when unreadable.
 */
export function residentMemory(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (field) => Number(new RegExp(`^${field}:\\s+(\\d+)\\s+kB$`, 'm').exec(status)?.[1] ?? NaN) * 1024;
    const rss = kib('VmRSS');
    return Number.isNaN(rss) ? null : { rss, anon: kib('RssAnon') };
  } catch {
    return null;
  }
}

/** Every process below `pid` (children, theirs, …), found by walking parent ids in /proc. */
export function descendants(pid) {
  const children = new Map();
  let entries = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The parent id is the second field after the parenthesised command name (which may hold spaces).
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // It exited while we looked.
    }
  }
  const out = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const child of children.get(queue.shift()) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

/** The command name of a process (`/proc/<pid>/comm`), or null once it is gone. */
export function commandName(pid) {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return null;
  }
}

/**
 * Samples the memory of `pids` (name → pid) every `everyMs` until stopped; `stop()` returns the
 * peak of each (by VmRSS) over the samples.
 */
export function sampleMemory(pids, everyMs = 250) {
  const peaks = new Map();
  const take = () => {
    for (const [name, pid] of pids) {
      const now = residentMemory(pid);
      if (now && (!peaks.has(name) || now.rss > peaks.get(name).rss)) peaks.set(name, now);
    }
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    stop() {
      clearInterval(timer);
      take();
      return peaks;
    },
  };
}

export const mib = (bytes) => (bytes === null || bytes === undefined ? '—' : (bytes / 2 ** 20).toFixed(1));

/** Busy and total CPU ticks of the whole machine so far (the `cpu` line of /proc/stat); null elsewhere. */
function machineTicks() {
  try {
    const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/);
    const ticks = fields.map(Number);
    // idle and iowait are the 4th and 5th.
    const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0);
    const total = ticks.reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return null;
  }
}

/**
 * Resolves once the machine has been mostly idle (under `busyShare` of its CPU time) for two
 * windows of `windowMs` in a row, or after `maxMs` whatever it does: what one side of a comparison
 * left running in the background (a runner making its spare sandbox, say) is not counted against
 * the other.
 */
export async function settle({ busyShare = 0.3, windowMs = 150, maxMs = 15_000 } = {}) {
  const deadline = Date.now() + maxMs;
  let quietWindows = 0;
  let last = machineTicks();
  if (last === null) return;
  while (quietWindows < 2 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, windowMs));
    const now = machineTicks();
    const total = now.total - last.total;
    quietWindows = total > 0 && (now.busy - last.busy) / total < busyShare ? quietWindows + 1 : 0;
    last = now;
  }
}
