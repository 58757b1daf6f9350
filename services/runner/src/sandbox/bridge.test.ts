import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createNetServer, connect, type Server } from 'node:net';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The jail's model bridge outlives each run, and the jail's other processes share its uid: a
// signal from one of them must not open a debugger in it.

const BRIDGE = join(import.meta.dirname, '..', '..', 'jail', 'bridge.mjs');

let dir: string;
let upstream: Server;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'threadwork-bridge-'));
  upstream = createNetServer((socket) => socket.end('pong'));
  await new Promise<void>((resolve) => upstream.listen(join(dir, 'up.sock'), resolve));
});
afterAll(async () => {
  await new Promise((resolve) => upstream?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

/** A free loopback port, as the jail's bridge port would be inside its network namespace. */
async function freePort(): Promise<number> {
  const probe = createNetServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

function relayOnce(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = connect(port, '127.0.0.1');
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.on('end', () => resolve(answer));
    socket.on('error', reject);
  });
}

/** Whether anything accepts a connection on the loopback port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/**
 * Whether `signal` still waits to be delivered to `pid` (Linux: the pending masks in
 * /proc/<pid>/status, the process's and each thread's, hold bit signal - 1).
 */
function pending(pid: number, signal: number): boolean {
  const bit = 1n << BigInt(signal - 1);
  return readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .filter((line) => /^(ShdPnd|SigPnd):/.test(line))
    .some((line) => (BigInt(`0x${line.split(':')[1]!.trim()}`) & bit) !== 0n);
}

describe('the jail’s model bridge', () => {
  it('opens no inspector on SIGUSR1, and goes on relaying', async () => {
    const port = await freePort();
    // Where Node's inspector would listen if the signal opened it: a port of this test's.
    const inspectorPort = await freePort();
    const ready = join(dir, 'ready');
    const child = spawn(
      process.execPath,
      [`--inspect-port=127.0.0.1:${inspectorPort}`, BRIDGE, ready, `${join(dir, 'up.sock')}=${port}`],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      await expect.poll(() => existsSync(ready), { timeout: 30_000 }).toBe(true);
      expect(await relayOnce(port)).toBe('pong');
      expect(await listening(inspectorPort)).toBe(false);

      child.kill('SIGUSR1');
      // The signal delivered: untaken, Node has woken its inspector's starter, which hands the
      // start to the event loop; the relay's round trip after it runs that loop through, and the
      // start, once run, listens before the loop goes on.
      await expect.poll(() => pending(child.pid!, constants.signals.SIGUSR1), { timeout: 30_000 }).toBe(false);
      expect(await relayOnce(port)).toBe('pong');
      expect(await listening(inspectorPort)).toBe(false);
      expect(child.exitCode).toBeNull();
      expect(stderr).not.toMatch(/Debugger|inspector/i);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
