import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer as createNetServer, connect, type Server } from 'node:net';
import { tmpdir } from 'node:os';
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

describe('the jail’s model bridge', () => {
  it('opens no inspector on SIGUSR1, and goes on relaying', async () => {
    const port = await freePort();
    const ready = join(dir, 'ready');
    const child = spawn(process.execPath, [BRIDGE, ready, `${join(dir, 'up.sock')}=${port}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      await expect.poll(() => existsSync(ready), { timeout: 30_000 }).toBe(true);
      expect(await relayOnce(port)).toBe('pong');

      child.kill('SIGUSR1');
      // Node starts its inspector (or says it could not) within moments of the signal; the bridge
      // answering a relay after it shows the signal has been taken.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await relayOnce(port)).toBe('pong');
      expect(child.exitCode).toBeNull();
      expect(stderr).not.toMatch(/Debugger|inspector/i);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
