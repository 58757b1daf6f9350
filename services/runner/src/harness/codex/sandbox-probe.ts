import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { JAIL_INIT_COMMAND, jailed, type JailOwner } from '../../sandbox/jail.js';
import { handOver } from '../../sandbox/uids.js';
import { codexCommand } from './launch.js';

// Codex's own sandbox (`workspace-write`: bubblewrap, seccomp, landlock) around each command the
// agent runs, as a second layer inside the jail: commands may write their workspace, HOME and
// /tmp, not the harness's home (Codex's sessions and configuration). Whether it works depends on
// the machine (nested user namespaces) and on where sandboxes live (Codex leaves /tmp writable, so
// a sandbox root under /tmp is not confined), so it is tried once at start-up, the way a run would
// use it: a command writes its workspace (must work) and the harness's home (must be refused).
// Jailed, it runs as runs will: as the owner given (an unprivileged uid), which owns its directories.
// Jailed, a command under it must not reach into the harness beside it: open the memory of the
// jail's init (pid 1, holding the runner's channel) or of Codex (pid 2) for writing, as it could
// with no Yama. Where Codex's sandbox gives commands a pid namespace of their own, those are not
// there to reach (its pid 1 is then Codex's own helper, whose command line is not the jail init's).

export type CodexSandboxProbe = { ok: true } | { ok: false; reason: string };

const PROBE_TIMEOUT_MS = 30_000;

export async function probeCodexSandbox(root: string, jail: { owner?: JailOwner } | null): Promise<CodexSandboxProbe> {
  const underTmp = !relative(tmpdir(), root).startsWith('..');
  if (underTmp) {
    return {
      ok: false,
      reason: `SANDBOX_ROOT ${root} is under ${tmpdir()}, which Codex's sandbox leaves writable (and keeps no helper in)`,
    };
  }
  const dir = join(root, `.codex-sandbox-probe-${randomBytes(4).toString('hex')}`);
  const [workspace, home, codexHome, run] = ['workspace', 'home', 'codex-home', 'run'].map((d) => join(dir, d)) as [
    string,
    string,
    string,
    string,
  ];
  try {
    for (const d of [workspace, home, codexHome, run]) await mkdir(d, { recursive: true });
    if (jail?.owner) await handOver([dir], jail.owner.uid);
    const codex = codexCommand();
    const script = [
      'echo ok > inside',
      `echo no > '${join(codexHome, 'outside')}'`,
      ...(jail
        ? [
            `case "$(tr '\\0' ' ' < /proc/1/cmdline)" in "${JAIL_INIT_COMMAND} "*) for p in 1 2; do (: 3<>/proc/$p/mem) 2>/dev/null && echo "/proc/$p/mem" >> reached; done;; esac`,
          ]
        : []),
      'true',
    ].join('; ');
    const probe = {
      command: codex.command,
      args: [...codex.args, 'sandbox', '-c', 'sandbox_mode="workspace-write"', '--', '/bin/sh', '-c', script],
    };
    const cmd = jail
      ? jailed(probe, {
          cwd: workspace,
          writable: [workspace, home, codexHome],
          readable: [],
          runDir: run,
          owner: jail.owner,
        })
      : probe;
    try {
      await promisify(execFile)(cmd.command, cmd.args, {
        cwd: workspace,
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, CODEX_HOME: codexHome },
        timeout: PROBE_TIMEOUT_MS,
      });
    } catch (err) {
      const stderr = (err as { stderr?: string }).stderr ?? '';
      const line = stderr
        .split('\n')
        .filter((l) => l.trim() && !l.startsWith('WARNING'))
        .at(-1);
      return { ok: false, reason: `codex sandbox did not run: ${line ?? (err as Error).message}` };
    }
    if (!existsSync(join(workspace, 'inside'))) {
      return { ok: false, reason: 'a command under codex sandbox could not write its workspace' };
    }
    if (existsSync(join(workspace, 'reached'))) {
      return {
        ok: false,
        reason: `it does not keep commands out of the harness's memory here (opened ${readFileSync(join(workspace, 'reached'), 'utf8').trim().replaceAll('\n', ', ')})`,
      };
    }
    if (existsSync(join(codexHome, 'outside'))) {
      return {
        ok: false,
        reason: `it does not confine commands here (SANDBOX_ROOT ${root} is under a directory it leaves writable, e.g. /tmp)`,
      };
    }
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: (err as Error).message };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
