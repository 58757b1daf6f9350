import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import type { Command } from '../harness/launch.js';
import { seccompFile } from './seccomp.js';
import { reachableByOthers } from './uids.js';

// The jail a sandbox's harness runs in (bubblewrap): everything the agent starts runs inside it.
// - System directories read-only (`/usr`, `/bin`, `/lib*`, a short list of `/etc`), nothing else of
//   the host's file system: not the other sandboxes, not the runner's state or git directories
//   (only their objects, read-only, which the agent's repository borrows), not the data directory.
// - Writable: this sandbox's workspaces, the harness's home and the agent's HOME; `/tmp` private.
// - New namespaces for everything (`--unshare-all`): its own PID namespace (the host's processes
//   are not visible, and everything in it dies with the harness), its own network namespace with
//   nothing but loopback, its own user namespace with no capabilities, in which the agent is an
//   ordinary user (JAIL_UID), not root, whatever the runner is outside.
// - Outside, an unprivileged uid of the sandbox's own where the runner runs as root (`owner`,
//   uids.ts): bubblewrap is started as that uid and gid, with no supplementary groups, so what the
//   jail holds outside is that user's, not root's. It must reach what is bound in: the sandbox's
//   directories are made so (local.ts), programs it cannot reach where they are (a checkout in a
//   private directory) are linked or copied to a directory it can (`owner.programs`).
// - Only the environment the harness is given (the runner's own never reaches it).
// - Nothing of the host's layout in what its processes show: bubblewrap reads its arguments (the
//   host paths it binds from, the gates' directory) from a descriptor, so the jail's init, whose
//   command line any process inside can read in /proc, shows none of them. (What is bound in is at
//   its own path, and /proc/self/mountinfo names the binds' sources.) Its own /etc/passwd, group,
//   hosts and gitconfig, not the host's (which name its people and services, its machines, its
//   credential helpers).
// - The model endpoint through the runner's proxy on a unix socket (model-proxy.ts), relayed to a
//   loopback port inside by a bridge: the model key stays outside. The rest of the network only
//   through the runner's egress proxy (egress.ts), relayed the same way, which enforces the policy.

const BWRAP = '/usr/bin/bwrap';
const SETPRIV = '/usr/bin/setpriv';
/** The agent's uid and gid inside the jail; outside, the sandbox's own uid (JailOwner) or the runner's. */
export const JAIL_UID = 1000;

/** Where the model proxy's socket directory appears inside the jail. */
export const JAIL_RUN_DIR = '/run/threadwork';
/** The loopback ports the bridge listens on inside the jail, and the sockets in JAIL_RUN_DIR they relay to. */
export const BRIDGE_PORT = 18080;
export const EGRESS_PORT = 18081;
export const MODEL_SOCKET = 'model.sock';
export const EGRESS_SOCKET = 'egress.sock';
/** The environment that sends a process's HTTP(S) traffic through an egress proxy on a loopback port. */
export function egressEnv(port: number): Record<string, string> {
  return Object.fromEntries(
    ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY']
      .flatMap((name) => {
        const url = `http://127.0.0.1:${port}`;
        return [
          [name, url],
          [name.toLowerCase(), url],
        ];
      })
      .concat([
        ['NO_PROXY', '127.0.0.1,localhost'],
        ['no_proxy', '127.0.0.1,localhost'],
      ]),
  );
}

/** The environment that sends a jailed process's HTTP(S) traffic through the egress proxy. */
export const EGRESS_ENV: Readonly<Record<string, string>> = egressEnv(EGRESS_PORT);
const BRIDGE = join(import.meta.dirname, '..', '..', 'jail', 'bridge.mjs');

/** Host `/etc` entries a shell, git and common tools need; the rest of `/etc` stays out. */
const ETC = [
  'nsswitch.conf',
  'ssl',
  'ca-certificates',
  'ca-certificates.conf',
  'alternatives',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'timezone',
  'mime.types',
  'os-release',
  'debian_version',
];

/** The jail's own `/etc` files, in place of the host's. */
const OWN_ETC: Readonly<Record<string, string>> = {
  // Its own users (the host's name the machine's people and services): root, which owns the
  // system directories, the agent, and nobody, which the host's other ids appear as.
  passwd: [
    'root:x:0:0:root:/root:/bin/sh',
    `sandbox:x:${JAIL_UID}:${JAIL_UID}:sandbox:/home/sandbox:/bin/sh`,
    'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin',
    '',
  ].join('\n'),
  group: ['root:x:0:', `sandbox:x:${JAIL_UID}:`, 'nogroup:x:65534:', ''].join('\n'),
  hosts: ['127.0.0.1\tlocalhost', '::1\tlocalhost ip6-localhost ip6-loopback', '127.0.1.1\tsandbox', ''].join('\n'),
  // Git's system configuration: no credential helper (there is nothing to ask for one), no
  // transport that runs a command, no file system monitor daemon.
  gitconfig: [
    '[credential]',
    '\thelper =',
    '[protocol "ext"]',
    '\tallow = never',
    '[core]',
    '\tfsmonitor = false',
    '',
  ].join('\n'),
};

/** How the jail's init (pid 1 inside) shows in /proc: its arguments are read from a descriptor. */
/** Descriptors bubblewrap reads: the seccomp filter, the jail's own `/etc` files, then its arguments. */
const SECCOMP_FD = 3;
const OWN_ETC_FD = 4;
const ARGS_FD = OWN_ETC_FD + Object.keys(OWN_ETC).length;
/** How the jail's init (pid 1 inside) shows in /proc: bubblewrap's arguments, read from a descriptor. */
export const JAIL_INIT_COMMAND = `${BWRAP} --args ${ARGS_FD} --`;

const SYSTEM = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/** The unprivileged user a jail's processes are outside it, when not the runner. */
export interface JailOwner {
  /** Its uid, and its gid. */
  uid: number;
  /**
   * A directory of the runner's that every user may pass through: programs the uid could not reach
   * where they are are linked (or copied) there, and bound in from there at their own paths.
   */
  programs: string;
}

export interface JailLayout {
  /** The harness's working directory (a workspace). */
  cwd: string;
  /** Read-write inside, at the same paths: the workspaces, the harness home, the agent's HOME. */
  writable: readonly string[];
  /** Read-only inside, at the same paths. */
  readable: readonly string[];
  /** Host directory holding the proxies' sockets (MODEL_SOCKET, EGRESS_SOCKET); appears as JAIL_RUN_DIR. */
  runDir: string;
  /** Size bound of the jail's /tmp (a tmpfs); none when absent. */
  tmpBytes?: number;
  /** Who the jail's processes are outside; the runner's own user when absent. */
  owner?: JailOwner;
}

function bwrapArgs(layout: JailLayout, programs: readonly (readonly [source: string, at: string])[]): string[] {
  // Nested user namespaces stay possible: Codex's own sandbox (the second layer) is made of them.
  const args = ['--unshare-all', '--uid', String(JAIL_UID), '--gid', String(JAIL_UID)];
  args.push('--die-with-parent', '--new-session', '--cap-drop', 'ALL');
  for (const dir of SYSTEM) args.push('--ro-bind-try', dir, dir);
  for (const entry of ETC) args.push('--ro-bind-try', `/etc/${entry}`, `/etc/${entry}`);
  Object.keys(OWN_ETC).forEach((entry, i) => args.push('--ro-bind-data', String(OWN_ETC_FD + i), `/etc/${entry}`));
  args.push('--proc', '/proc', '--dev', '/dev');
  if (layout.tmpBytes) args.push('--size', String(layout.tmpBytes));
  args.push('--tmpfs', '/tmp');
  for (const [source, at] of programs) args.push('--ro-bind', source, at);
  for (const path of layout.readable) args.push('--ro-bind', path, path);
  for (const path of layout.writable) args.push('--bind', path, path);
  // Read-only: connecting to a socket needs no write, and a writable one would be the agent's way
  // to fill the runner's own temporary directory, past every bound of its sandbox.
  args.push('--ro-bind', layout.runDir, JAIL_RUN_DIR);
  args.push('--hostname', 'sandbox', '--chdir', layout.cwd);
  return args;
}

let etcFiles: string[] | undefined;

/** The jail's own `/etc` files, written once in a directory of the runner's. */
function ownEtcFiles(): string[] {
  if (etcFiles) return etcFiles;
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-jail-etc-'));
  etcFiles = Object.entries(OWN_ETC).map(([name, text]) => {
    writeFileSync(join(dir, name), text, { mode: 0o400 });
    return join(dir, name);
  });
  return etcFiles;
}

/**
 * bubblewrap with `args`, read from a descriptor (`--args`), the seccomp filter (seccomp.ts) and
 * the jail's own `/etc` files on others: a shell opens the runner's files of them, removes the one
 * of the arguments (written for this jail alone), then becomes bubblewrap, which reads them all
 * before anything in the jail runs. Its command line (the jail's init keeps it) is then only
 * `bwrap --args N -- <inner>`. With an owner, bubblewrap is started as that user (util-linux
 * `setpriv`), after the files are open: they stay the runner's alone.
 */
function bwrap(args: readonly string[], inner: readonly string[], owner: JailOwner | undefined): Command {
  const as = owner ? [SETPRIV, '--reuid', String(owner.uid), '--regid', String(owner.uid), '--clear-groups', '--'] : [];
  const filter = seccompFile();
  const all = [...args, ...(filter ? ['--seccomp', String(SECCOMP_FD)] : [])];
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-jail-args-'));
  const argsFile = join(dir, 'args');
  writeFileSync(argsFile, all.map((arg) => `${arg}\0`).join(''), { mode: 0o400 });
  const files = [filter ?? '/dev/null', ...ownEtcFiles(), argsFile];
  const open = files.map((_, i) => `${SECCOMP_FD + i}< "$${i + 1}"`).join(' ');
  const script = `exec ${open} && rm -rf -- "$${files.length + 1}" && shift ${files.length + 1} && exec "$@"`;
  return {
    command: '/bin/sh',
    args: ['-c', script, 'sh', ...files, dir, ...as, BWRAP, '--args', String(ARGS_FD), '--', ...inner],
  };
}

/** Files and directories of a command the jail must show (read-only) for it to run. */
function programPaths(cmd: Command): string[] {
  const paths = [process.execPath, BRIDGE];
  // The native codex binary sits in `vendor/<triple>/bin/` beside the tools it ships (`path/rg`).
  if (cmd.command !== process.execPath) paths.push(dirname(dirname(cmd.command)));
  else if (cmd.args[0]) paths.push(dirname(dirname(cmd.args[0])));
  // System directories are there already, and nothing above them (`/` for a program in `/bin`) may be.
  return paths.filter(
    (path) =>
      !SYSTEM.some((dir) => path === dir || path.startsWith(`${dir}/`) || dir.startsWith(`${path}/`) || path === '/'),
  );
}

/**
 * Where bubblewrap, started as `owner`, finds `path`: where it is if that user can reach it, else
 * a copy in `owner.programs` — hard links where the disk allows (nothing copied), named after the
 * path and its change time, so runners sharing the directory share it and a changed program gets a
 * new one. Made aside and moved in whole.
 */
function programSource(path: string, owner: JailOwner): string {
  if (reachableByOthers(path)) return path;
  const real = realpathSync(path);
  const stat = statSync(real);
  const key = createHash('sha256').update(`${real}\0${stat.ino}\0${stat.ctimeMs}`).digest('hex').slice(0, 24);
  const target = join(owner.programs, key);
  if (!existsSync(target)) {
    mkdirSync(owner.programs, { recursive: true, mode: 0o711 });
    const aside = mkdtempSync(join(owner.programs, '.partial-'));
    try {
      const copy = join(aside, 'p');
      try {
        execFileSync('cp', ['-a', '--link', '--', real, copy], { stdio: 'ignore' });
      } catch {
        rmSync(copy, { recursive: true, force: true });
        execFileSync('cp', ['-a', '--', real, copy], { stdio: 'ignore' });
      }
      try {
        renameSync(copy, target);
      } catch (err) {
        // Another runner moved the same one in meanwhile.
        if (!existsSync(target)) throw err;
      }
    } finally {
      rmSync(aside, { recursive: true, force: true });
    }
  }
  return target;
}

/**
 * `cmd` inside the jail, behind the bridge to the model proxy: the jail's shell starts the bridge,
 * waits until it listens, then becomes the harness (so the harness is the jail's main process:
 * when it exits, the jail and everything in it goes).
 */
export function jailed(cmd: Command, layout: JailLayout): Command {
  const ready = '/tmp/.threadwork-bridge-ready';
  // The bridge gets none of the shell's standard input and output: those are the runner's channel
  // to the harness, which nothing else in the jail may hold.
  const script = [
    `"${process.execPath}" "${BRIDGE}" ${ready} "${JAIL_RUN_DIR}/${MODEL_SOCKET}=${BRIDGE_PORT}" "${JAIL_RUN_DIR}/${EGRESS_SOCKET}=${EGRESS_PORT}" < /dev/null > /dev/null &`,
    'i=0',
    `while [ ! -e ${ready} ]; do i=$((i+1)); if [ $i -gt 3000 ]; then echo "the model bridge did not start" >&2; exit 97; fi; sleep 0.01; done`,
    'exec "$@"',
  ].join('\n');
  const owner = layout.owner;
  const programs = programPaths(cmd).map((path) => [owner ? programSource(path, owner) : path, path] as const);
  return bwrap(bwrapArgs(layout, programs), ['/bin/sh', '-c', script, 'sh', cmd.command, ...cmd.args], owner);
}

export type JailMode = 'required' | 'auto' | 'off';

/**
 * Whether a jail can be made here: bubblewrap present and allowed to create its namespaces — as
 * `owner` when given (started as an unprivileged user, it needs unprivileged user namespaces).
 */
export async function probeJail(owner?: JailOwner): Promise<{ ok: true } | { ok: false; reason: string }> {
  if (!existsSync(BWRAP))
    return { ok: false, reason: `${BWRAP} is not installed (Debian: apt-get install bubblewrap)` };
  if (owner && !existsSync(SETPRIV)) return { ok: false, reason: `${SETPRIV} is not installed (Debian: util-linux)` };
  const layout: JailLayout = { cwd: '/', writable: [], readable: [], runDir: '/tmp' };
  try {
    const probe = bwrap(bwrapArgs(layout, []), ['/bin/true'], owner);
    await promisify(execFile)(probe.command, probe.args, { timeout: 10_000 });
    return { ok: true };
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    return { ok: false, reason: `bubblewrap cannot create a jail here: ${stderr || (err as Error).message}` };
  }
}
