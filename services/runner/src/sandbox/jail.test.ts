import { execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { descendants } from '../harness/processes.js';
import { jailFixture } from '../../test/support/jail.js';
import { jailed, type JailLayout, type JailOwner } from './jail.js';
import { SandboxUids } from './uids.js';

// The jail on its own, around a shell instead of a harness: what it lets a process inside see and
// change, whatever else (Codex's own sandbox) may wrap the agent's commands in a run.

const fixture = jailFixture('jail-test');
const { dir, layout } = fixture;
let listener: Server;
let port: number;
let available = false;

beforeAll(async () => {
  available = await fixture.prepare();
  writeFileSync(join(dir, 'objects', 'pack'), 'objects\n');
  writeFileSync(join(dir, 'outside.txt'), 'not for the jail\n');
  listener = createServer((socket) => socket.end('hello\n'));
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise((resolve) => listener?.close(resolve));
  fixture.remove();
});

/** Runs `script` in the jail; answers what it printed. */
async function inJail(script: string, where: JailLayout = layout): Promise<string> {
  const cmd = jailed({ command: '/bin/sh', args: ['-c', script] }, where);
  const { stdout } = await promisify(execFile)(cmd.command, cmd.args, {
    cwd: where.cwd,
    env: { PATH: '/usr/bin:/bin', HOME: where.cwd },
    timeout: 60_000,
  });
  return stdout;
}

const attempt = (label: string, command: string) =>
  `if (${command}) >/dev/null 2>&1; then echo "${label}: yes"; else echo "${label}: no"; fi`;

describe('a jail', () => {
  it('lets its process write its workspace and a bounded /tmp only, as an ordinary user, with no network', async (ctx) => {
    if (!available) ctx.skip();
    const found = await inJail(
      [
        'echo "uid: $(id -u)"',
        attempt('workspace', 'echo x > work.txt'),
        attempt('objects readable', `cat ${join(dir, 'objects', 'pack')}`),
        attempt('objects writable', `echo x > ${join(dir, 'objects', 'pack')}`),
        attempt('gates writable', 'echo x > /run/threadwork/fill'),
        attempt('outside visible', `cat ${join(dir, 'outside.txt')}`),
        attempt('tmp past its bound', 'head -c 16777216 /dev/zero > /tmp/fill'),
        attempt('host port', `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port}'`),
      ].join('\n'),
    );
    expect(found.split('\n').filter(Boolean)).toEqual([
      'uid: 1000',
      'workspace: yes',
      'objects readable: yes',
      'objects writable: no',
      'gates writable: no',
      'outside visible: no',
      'tmp past its bound: no',
      'host port: no',
    ]);
    expect(existsSync(join(layout.cwd, 'work.txt'))).toBe(true);
    expect(existsSync(join(layout.runDir, 'fill'))).toBe(false);
  });

  it('shows none of the host’s layout in its processes’ command lines, its own /etc/hosts and git configuration', async (ctx) => {
    if (!available) ctx.skip();
    const found = await inJail(
      [
        'echo "== init"; tr "\\0" " " < /proc/1/cmdline; echo',
        'echo "== fds"; ls /proc/$$/fd',
        'echo "== hosts"; cat /etc/hosts',
        'echo "== git"; git config --system --list',
        'echo "== users"; cat /etc/passwd /etc/group',
        'echo "== me"; id',
      ].join('\n'),
    );
    const section = (name: string) => found.split(`== ${name}\n`)[1]!.split('\n== ')[0]!.trim();
    // bubblewrap read where it binds from on a descriptor: the init's command line shows none of it.
    expect(section('init')).toMatch(/^\/usr\/bin\/bwrap --args \d+ -- /);
    expect(section('init')).not.toContain(dir);
    expect(section('init')).not.toMatch(/threadwork-(seccomp|jail)/);
    // And none of the descriptors it read them from is left open in the jail (this test's own
    // process may pass others of its own down).
    expect(
      section('fds')
        .split(/\s+/)
        .filter((fd) => Number(fd) >= 3 && Number(fd) <= 9),
    ).toEqual([]);
    expect(section('hosts')).toBe(
      ['127.0.0.1\tlocalhost', '::1\tlocalhost ip6-localhost ip6-loopback', '127.0.1.1\tsandbox'].join('\n'),
    );
    expect(section('git')).toBe(['credential.helper=', 'protocol.ext.allow=never', 'core.fsmonitor=false'].join('\n'));
    // Its own users: none of the host's names.
    expect(
      section('users')
        .split('\n')
        .map((line) => line.split(':')[0]),
    ).toEqual(['root', 'sandbox', 'nobody', 'root', 'sandbox', 'nogroup']);
    expect(section('me')).toBe('uid=1000(sandbox) gid=1000(sandbox) groups=1000(sandbox)');
  });

  it('lets nothing in it trace another process there, or take its descriptors or memory', async (ctx) => {
    if (!available || !existsSync('/usr/bin/python3')) ctx.skip();
    // The harness and the agent share the jail's uid: a process of the agent's must not reach into
    // the harness (its parent here) by ptrace, pidfd_getfd or process_vm_readv.
    const calls = [
      'import ctypes, os',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'def tried(name, nr, *args):',
      '    r = libc.syscall(nr, *args)',
      '    print(name + ": " + ("allowed" if r >= 0 else os.strerror(ctypes.get_errno())))',
      'x64 = os.uname().machine == "x86_64"',
      'parent = os.getppid()',
      'tried("ptrace", 101 if x64 else 117, 16, parent, 0, 0)',
      'pidfd = os.pidfd_open(parent)',
      'tried("pidfd_getfd", 438, pidfd, 0, 0)',
      'buf = ctypes.create_string_buffer(8)',
      'class iovec(ctypes.Structure): _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]',
      'local = iovec(ctypes.addressof(buf), 8)',
      'tried("process_vm_readv", 310 if x64 else 270, parent, ctypes.byref(local), 1, ctypes.byref(local), 1, 0)',
    ].join('\n');
    const found = await inJail(`python3 -c '${calls.replaceAll("'", "'\\''")}'`);
    expect(found.split('\n').filter(Boolean)).toEqual([
      'ptrace: Operation not permitted',
      'pidfd_getfd: Operation not permitted',
      'process_vm_readv: Operation not permitted',
    ]);
  });
});

/** The real, effective, saved and file-system ids of a process, and its supplementary groups, from /proc. */
function idsOf(pid: number): { uid: number[]; gid: number[]; groups: string } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => new RegExp(`^${name}:[ \\t]*(.*)$`, 'm').exec(status)?.[1]?.trim() ?? '';
  return {
    uid: field('Uid').split(/\s+/).map(Number),
    gid: field('Gid').split(/\s+/).map(Number),
    groups: field('Groups'),
  };
}

// Where the runner runs as root, a jail runs as its sandbox's own uid outside (uids.ts): what an
// agent that got out of it would be. Only root can switch uid, so only a root run tests it.
describe('a jail of a sandbox with a uid of its own', () => {
  const root = mkdtempSync('/var/tmp/threadwork-jail-owner-test-');
  const range = { first: 210000 + Math.floor(Math.random() * 50_000), last: 0 };
  range.last = range.first + 100;
  let owners: Map<string, JailOwner>;
  const sandboxOf = (name: string): JailLayout => ({
    cwd: join(root, name, 'workspace'),
    writable: [join(root, name, 'workspace')],
    readable: [],
    runDir: join(root, name, 'run'),
    owner: owners.get(name),
  });

  beforeAll(async () => {
    if (process.getuid?.() !== 0) return;
    // As the local provider lays a sandbox out: its folder the runner's and its uid's group's
    // (0710), its workspace the uid's, the runner's state beside it the runner's alone.
    chmodSync(root, 0o711);
    const uids = new SandboxUids(root, range);
    owners = new Map();
    for (const name of ['a', 'b']) {
      const uid = await uids.claim(name, undefined);
      owners.set(name, { uid, programs: join(root, '.jail-programs') });
      const { cwd, runDir } = sandboxOf(name);
      mkdirSync(cwd, { recursive: true });
      mkdirSync(runDir);
      chownSync(join(root, name), 0, uid);
      chmodSync(join(root, name), 0o710);
      chownSync(cwd, uid, uid);
      writeFileSync(join(root, name, 'threadwork.json'), '{"secret": "the runner’s"}\n', { mode: 0o600 });
      // Left by the runner in what the jail shows, readable by its owner only.
      writeFileSync(join(cwd, 'runner-only.txt'), 'the runner’s\n', { mode: 0o600 });
    }
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('runs as an ordinary user inside, and outside as the sandbox’s uid: not root, not the runner', async (ctx) => {
    if (!available || process.getuid?.() !== 0) ctx.skip();
    const a = sandboxOf('a');
    const uid = a.owner!.uid;
    const cmd = jailed(
      { command: '/bin/sh', args: ['-c', 'id -u; echo made > made.txt; echo ready; exec sleep 60'] },
      a,
    );
    const child = spawn(cmd.command, cmd.args, {
      cwd: a.cwd,
      env: { PATH: '/usr/bin:/bin' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let out = '';
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          out += chunk.toString();
          if (out.includes('ready')) resolve();
        });
        child.once('exit', (code) => reject(new Error(`the jail exited (${code}) before it was ready: ${out}`)));
      });
      expect(out.split('\n')[0]).toBe('1000');
      // Everything the jail runs, bubblewrap included: real, effective, saved and file-system ids.
      const pids = [child.pid!, ...descendants(child.pid!)];
      expect(pids.length).toBeGreaterThanOrEqual(3);
      for (const pid of pids) {
        const ids = idsOf(pid);
        expect(ids.uid, `uid of ${pid}`).toEqual([uid, uid, uid, uid]);
        expect(ids.gid, `gid of ${pid}`).toEqual([uid, uid, uid, uid]);
        expect(ids.groups, `groups of ${pid}`).toBe('');
      }
      expect(uid).not.toBe(0);
      expect(uid).not.toBe(process.getuid!());
      // What it writes is that uid's, outside as well.
      const made = statSync(join(a.cwd, 'made.txt'));
      expect([made.uid, made.gid]).toEqual([uid, uid]);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('cannot read what the runner keeps for itself, even where it is bound in, nor another sandbox’s files', async (ctx) => {
    if (!available || process.getuid?.() !== 0) ctx.skip();
    const a = sandboxOf('a');
    const b = sandboxOf('b');
    expect(a.owner!.uid).not.toBe(b.owner!.uid);
    const found = await inJail(
      [
        attempt('runner’s file in its workspace', 'cat runner-only.txt'),
        attempt('own file', 'echo x > own.txt && cat own.txt'),
      ].join('\n'),
      a,
    );
    expect(found.split('\n').filter(Boolean)).toEqual(['runner’s file in its workspace: no', 'own file: yes']);
    // Outside the jail (as if it had got out), as the sandbox's uid: the runner's state beside its
    // workspace, and the other sandbox, are closed to it.
    const as = (uid: number, ...command: string[]) =>
      promisify(execFile)('/usr/bin/setpriv', [
        '--reuid',
        String(uid),
        '--regid',
        String(uid),
        '--clear-groups',
        '--',
        ...command,
      ]).then(
        () => 'yes',
        () => 'no',
      );
    expect(await as(a.owner!.uid, 'cat', join(root, 'a', 'threadwork.json'))).toBe('no');
    expect(await as(a.owner!.uid, 'ls', join(root, 'a'))).toBe('no');
    expect(await as(a.owner!.uid, 'ls', b.cwd)).toBe('no');
    expect(await as(b.owner!.uid, 'cat', join(a.cwd, 'own.txt'))).toBe('no');
    expect(await as(a.owner!.uid, 'cat', join(a.cwd, 'own.txt'))).toBe('yes');
  });

  it('runs a program from a directory its uid cannot reach (a checkout in a private directory)', async (ctx) => {
    if (!available || process.getuid?.() !== 0) ctx.skip();
    const a = sandboxOf('a');
    const hidden = mkdtempSync(join(root, 'private-'));
    const tool = join(hidden, 'tool', 'bin', 'tool');
    mkdirSync(join(hidden, 'tool', 'bin'), { recursive: true });
    writeFileSync(tool, '#!/bin/sh\necho "tool ran as $(id -u)"\n', { mode: 0o755 });
    expect(statSync(hidden).mode & 0o777).toBe(0o700);
    const cmd = jailed({ command: tool, args: [] }, a);
    const { stdout } = await promisify(execFile)(cmd.command, cmd.args, { cwd: a.cwd, env: { PATH: '/usr/bin:/bin' } });
    expect(stdout).toBe('tool ran as 1000\n');
  });
});
