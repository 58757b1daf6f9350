import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jailed, probeJail, type JailLayout } from './jail.js';

// The jail on its own, around a shell instead of a harness: what it lets a process inside see and
// change, whatever else (Codex's own sandbox) may wrap the agent's commands in a run.

const dir = mkdtempSync('/var/tmp/threadwork-jail-test-');
const layout: JailLayout = {
  cwd: join(dir, 'workspace'),
  writable: [join(dir, 'workspace')],
  readable: [join(dir, 'objects')],
  runDir: join(dir, 'run'),
  tmpBytes: 8 * 2 ** 20,
};
let listener: Server;
let port: number;
let available = false;

beforeAll(async () => {
  for (const d of [layout.cwd, ...layout.readable, layout.runDir]) mkdirSync(d, { recursive: true });
  writeFileSync(join(dir, 'objects', 'pack'), 'objects\n');
  writeFileSync(join(dir, 'outside.txt'), 'not for the jail\n');
  listener = createServer((socket) => socket.end('hello\n'));
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  port = (listener.address() as { port: number }).port;
  available = (await probeJail()).ok;
});
afterAll(async () => {
  await new Promise((resolve) => listener?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `script` in the jail; answers what it printed. */
async function inJail(script: string): Promise<string> {
  const cmd = jailed({ command: '/bin/sh', args: ['-c', script] }, layout);
  const { stdout } = await promisify(execFile)(cmd.command, cmd.args, {
    cwd: layout.cwd,
    env: { PATH: '/usr/bin:/bin', HOME: layout.cwd },
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
