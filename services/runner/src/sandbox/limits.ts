import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Command } from '../harness/codex/launch.js';

// How many processes (tasks: threads count) a jail may hold, so that a fork bomb inside stays
// inside: the runner, other sandboxes and the node keep working. Two ways, whichever this machine
// allows, found once at start-up:
// - a pids cgroup per jailed harness, where the runner may make one (cgroup v1's pids hierarchy,
//   or a cgroup v2 tree with the pids controller delegated);
// - else RLIMIT_NPROC (util-linux `prlimit`): the kernel counts it per user namespace, so it holds
//   the jail's own processes — but not for a runner running as root on the host, which it exempts.
// The jail's own /tmp is a tmpfs of bounded size (jail.ts).

const PRLIMIT = '/usr/bin/prlimit';

export type ProcessLimitMethod = 'cgroup' | 'rlimit';

export interface ProcessLimit {
  max: number;
  method: ProcessLimitMethod;
  /** The directory under which each jail's cgroup is made (cgroup only). */
  base?: string;
}

/** The pids cgroup this process is in, as a directory the runner may make children in; null when none. */
function pidsCgroupBase(): string | null {
  let lines: string[];
  try {
    lines = readFileSync('/proc/self/cgroup', 'utf8').split('\n');
  } catch {
    return null;
  }
  for (const line of lines) {
    const [, controllers = '', path = ''] = line.split(':');
    if (controllers.split(',').includes('pids')) return join('/sys/fs/cgroup/pids', path);
  }
  const unified = lines.find((line) => line.startsWith('0::'));
  if (unified && existsSync('/sys/fs/cgroup/cgroup.controllers')) {
    const base = join('/sys/fs/cgroup', unified.slice(3));
    try {
      if (readFileSync(join(base, 'cgroup.subtree_control'), 'utf8').split(/\s+/).includes('pids')) return base;
    } catch {
      return null;
    }
  }
  return null;
}

/** How this machine can bound a jail's processes to `max`; null (with why) when it cannot. */
export async function probeProcessLimit(
  max: number,
): Promise<{ ok: true; limit: ProcessLimit } | { ok: false; reason: string }> {
  const base = pidsCgroupBase();
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
  if (process.getuid?.() === 0) {
    return {
      ok: false,
      reason: 'no pids cgroup can be made here, and RLIMIT_NPROC does not bind a runner running as root',
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
  /** Frees what the limit took (the cgroup), once the command has exited. */
  release(): Promise<void>;
}

/** `cmd` started inside the limit: its process joins a cgroup of its own, or gets the rlimit, before it runs. */
export async function limited(cmd: Command, limit: ProcessLimit): Promise<LimitedCommand> {
  if (limit.method === 'rlimit') {
    return {
      command: { command: PRLIMIT, args: [`--nproc=${limit.max}`, '--', cmd.command, ...cmd.args] },
      release: async () => {},
    };
  }
  const dir = join(limit.base!, `threadwork-${process.pid}-${randomBytes(6).toString('hex')}`);
  await mkdir(dir);
  await writeFile(join(dir, 'pids.max'), String(limit.max));
  return {
    // The shell joins the cgroup, then becomes the command: everything it starts is counted.
    command: {
      command: '/bin/sh',
      args: ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', dir, cmd.command, ...cmd.args],
    },
    async release() {
      // The jail's processes die with it; the cgroup can go once the last one has.
      for (let tries = 0; tries < 50; tries++) {
        try {
          await rmdir(dir);
          return;
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'ENOENT') return;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    },
  };
}
