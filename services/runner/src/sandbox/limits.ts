import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Command } from '../harness/launch.js';

// What a jail may take of the machine, so that a fork bomb or a runaway allocation inside stays
// inside: the runner, other sandboxes and the node keep working.
//
// Processes (tasks: threads count), two ways, whichever this machine allows, found once at start-up:
// - a pids cgroup per jailed harness, where the runner may make one (cgroup v1's pids hierarchy,
//   or a cgroup v2 tree with the pids controller delegated);
// - else RLIMIT_NPROC (util-linux `prlimit`): the kernel counts it per user (and user namespace),
//   so it holds the jail's own processes — where the jail runs as a uid of its sandbox's own, or
//   as a runner that is not root; the kernel exempts root, so not for jails that run as root.
// Memory: a memory cgroup per jailed harness (v1's memory hierarchy, or v2 with the memory
// controller delegated), swap included where the kernel accounts it. Past it, the kernel's OOM
// killer takes a process of the jail, never one outside it. No rlimit stands in for it: an
// address-space limit breaks runtimes that reserve more than they use.
// The jail's own /tmp is a tmpfs of bounded size (jail.ts); its pages count as the jail's memory.

const PRLIMIT = '/usr/bin/prlimit';

export type ProcessLimitMethod = 'cgroup' | 'rlimit';

export interface ProcessLimit {
  max: number;
  method: ProcessLimitMethod;
  /** The directory under which each jail's cgroup is made (cgroup only). */
  base?: string;
}

export interface MemoryLimit {
  maxBytes: number;
  /** The directory under which each jail's memory cgroup is made. */
  base: string;
  version: 1 | 2;
}

/** What bounds each jail, as found at start-up; null where this machine cannot bound it. */
export interface JailLimits {
  processes: ProcessLimit | null;
  memory: MemoryLimit | null;
}

/** The cgroup of `controller` this process is in, as a directory the runner may make children in; null when none. */
function cgroupBase(controller: 'pids' | 'memory'): { base: string; version: 1 | 2 } | null {
  let lines: string[];
  try {
    lines = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  } catch {
    return null;
  }
  for (const line of lines) {
    const [, controllers = '', path = ''] = line.split(':');
    if (controllers.split(',').includes(controller))
      return { base: join('/sys/fs/cgroup', controller, path), version: 1 };
  }
  const unified = lines.find((line) => line.startsWith('0::'));
  if (unified && existsSync('/sys/fs/cgroup/cgroup.controllers')) {
    const base = join('/sys/fs/cgroup', unified.slice(3));
    try {
      if (readFileSync(join(base, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes(controller)) {
        return { base, version: 2 };
      }
    } catch {
      return null;
    }
  }
  return null;
}

/** Writes a memory cgroup's limit: memory first, then memory and swap together where accounted. */
async function writeMemoryLimit(dir: string, limit: { maxBytes: number; version: 1 | 2 }): Promise<void> {
  const bytes = String(limit.maxBytes);
  if (limit.version === 1) {
    await writeFile(join(dir, 'memory.limit_in_bytes'), bytes);
    if (existsSync(join(dir, 'memory.memsw.limit_in_bytes')))
      await writeFile(join(dir, 'memory.memsw.limit_in_bytes'), bytes);
    return;
  }
  await writeFile(join(dir, 'memory.max'), bytes);
  if (existsSync(join(dir, 'memory.swap.max'))) await writeFile(join(dir, 'memory.swap.max'), '0');
}

/** How this machine can bound a jail's memory to `maxBytes`; null (with why) when it cannot. */
export async function probeMemoryLimit(
  maxBytes: number,
): Promise<{ ok: true; limit: MemoryLimit } | { ok: false; reason: string }> {
  const found = cgroupBase('memory');
  if (!found) return { ok: false, reason: 'this process is in no memory cgroup the runner may divide' };
  const probe = join(found.base, `threadwork-probe-${randomBytes(4).toString('hex')}`);
  try {
    await mkdir(probe);
    await writeMemoryLimit(probe, { maxBytes, version: found.version });
    await sweepCgroups(found.base);
    return { ok: true, limit: { maxBytes, base: found.base, version: found.version } };
  } catch (err) {
    return { ok: false, reason: `no memory cgroup can be made here (${(err as Error).message})` };
  } finally {
    await rmdir(probe).catch(() => undefined);
  }
}

/**
 * How this machine can bound a jail's processes to `max`; null (with why) when it cannot.
 * `ownUids`: each jail runs as a uid of its sandbox's own outside (uids.ts), never root.
 */
export async function probeProcessLimit(
  max: number,
  ownUids = false,
): Promise<{ ok: true; limit: ProcessLimit } | { ok: false; reason: string }> {
  const base = cgroupBase('pids')?.base;
  if (base) {
    const probe = join(base, `threadwork-probe-${randomBytes(4).toString('hex')}`);
    try {
      await mkdir(probe);
      await writeFile(join(probe, 'pids.max'), String(max));
      await sweepCgroups(base);
      return { ok: true, limit: { max, method: 'cgroup', base } };
    } catch {
      // Not ours to write (a read-only /sys/fs/cgroup, as in most containers): the rlimit then.
    } finally {
      await rmdir(probe).catch(() => undefined);
    }
  }
  if (process.getuid?.() === 0 && !ownUids) {
    return {
      ok: false,
      reason: 'no pids cgroup can be made here, and RLIMIT_NPROC does not bind jails that run as root',
    };
  }
  if (!existsSync(PRLIMIT)) return { ok: false, reason: `${PRLIMIT} is not installed (Debian: util-linux)` };
  return { ok: true, limit: { max, method: 'rlimit' } };
}

/** Removes the cgroups of runners that are gone (killed before they could), once they are empty. */
async function sweepCgroups(base: string): Promise<void> {
  for (const name of await readdir(base)) {
    const owner = /^threadwork-(\d+)-/.exec(name)?.[1];
    if (!owner || Number(owner) === process.pid || existsSync(`/proc/${owner}`)) continue;
    await rmdir(join(base, name)).catch(() => undefined);
  }
}

export interface LimitedCommand {
  command: Command;
  /** Frees what the limits took (the cgroups), once the command has exited. */
  release(): Promise<void>;
}

/**
 * `cmd` started inside the limits: its process joins a cgroup of its own per controller (or gets
 * the process rlimit) before it runs, so everything it starts is counted from the first instruction.
 */
export async function limited(cmd: Command, limits: JailLimits): Promise<LimitedCommand> {
  const { processes, memory } = limits;
  const name = `threadwork-${process.pid}-${randomBytes(6).toString('hex')}`;
  const dirs: string[] = [];
  try {
    if (processes?.method === 'cgroup') {
      const dir = join(processes.base!, name);
      await mkdir(dir);
      dirs.push(dir);
      await writeFile(join(dir, 'pids.max'), String(processes.max));
    }
    if (memory) {
      const dir = join(memory.base, name);
      // cgroup v2 with both controllers: one directory holds both limits.
      if (!dirs.includes(dir)) {
        await mkdir(dir);
        dirs.push(dir);
      }
      await writeMemoryLimit(dir, memory);
    }
  } catch (err) {
    await removeCgroups(dirs);
    throw err;
  }
  let command = cmd;
  if (processes?.method === 'rlimit') {
    command = { command: PRLIMIT, args: [`--nproc=${processes.max}`, '--', cmd.command, ...cmd.args] };
  }
  if (dirs.length > 0) {
    // The shell joins each cgroup (given as $0, ${1}, …), then becomes the command.
    const param = (i: number) => (i === 0 ? '$0' : `\${${i}}`);
    const joins = dirs.map((_, i) => `echo $$ > "${param(i)}/cgroup.procs"`).join(' && ');
    const script = `${joins} && shift ${dirs.length - 1} && exec "$@"`;
    command = { command: '/bin/sh', args: ['-c', script, ...dirs, command.command, ...command.args] };
  }
  return { command, release: () => removeCgroups(dirs) };
}

/** Removes the cgroups once the last process in them has gone (the jail's die with it). */
async function removeCgroups(dirs: string[]): Promise<void> {
  for (const dir of dirs) {
    for (let tries = 0; tries < 50; tries++) {
      try {
        await rmdir(dir);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }
}
