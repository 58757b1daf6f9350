import { readdirSync, readFileSync } from 'node:fs';

// A harness runs commands in sessions of their own (a PTY per command), outside its process
// group, so stopping it by group misses them. Its descendants are found by walking parent ids in
// /proc and killed by pid. Where there is no /proc the list is empty and the group kill is all.

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
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parents.set(Number(entry), Number(fields[1]));
    } catch {
      // Exited while we looked.
    }
  }
  return parents;
}

/** Every process below `pid`, children first then theirs. */
export function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const [child, parent] of parentIds()) {
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
