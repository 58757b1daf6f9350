import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';

// A service logs to a pipe. When the reader of that pipe stops reading (a supervisor that is stuck
// or being killed) or goes away, the service must still act on SIGTERM and exit: its logging never
// blocks it. Run as a real process (the built library), since the point is the process's own fd 1.

const dist = resolve(import.meta.dirname, '..', 'dist', 'index.js');

const SERVICE = `
const { createLogger, stopOnSignal } = await import(${JSON.stringify(dist)});
const logger = createLogger({ service: 'chatty' });
stopOnSignal({ stop: async () => logger.info('stopping its work') }, logger, 2_000);
// Far more than any pipe holds: 4 KiB lines, as fast as the loop turns.
setInterval(() => logger.info('line ' + 'x'.repeat(4_000)), 1);
process.stdout.isTTY; // touching process.stdout must not make our writes blocking again
console.error('running');
`;

async function stopWhileReader(mode: 'stalled' | 'gone'): Promise<{ code: number | null; lines: number }> {
  const child = spawn(process.execPath, ['--input-type=module', '-e', SERVICE], { stdio: ['ignore', 'pipe', 'pipe'] });
  let bytes = 0;
  child.stdout.on('data', (chunk: Buffer) => (bytes += chunk.length));
  await new Promise<void>((ready) => child.stderr.once('data', () => ready()));
  // Let it log, then stop reading (the pipe fills) or close our end.
  while (bytes < 256 * 1024) await sleep(20);
  if (mode === 'stalled') child.stdout.pause();
  else child.stdout.destroy();
  const seen = bytes;
  // Long enough for any pipe to fill: the service keeps logging meanwhile.
  await sleep(1_500);
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  child.kill('SIGTERM');
  const guard = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const code = await exited;
  clearTimeout(guard);
  return { code, lines: seen };
}

describe('logging to a pipe', () => {
  it('is built (npm test builds the libraries)', () => {
    expect(existsSync(dist), join('libs', 'platform', 'dist')).toBe(true);
  });

  it('a reader that stopped reading does not keep the service from stopping', async () => {
    const { code } = await stopWhileReader('stalled');
    // 0: it stopped through its own shutdown, not by the guard's SIGKILL (null) or a deadline (1).
    expect(code).toBe(0);
  });

  it('a reader that went away does not keep the service from stopping, nor crash it before', async () => {
    const { code } = await stopWhileReader('gone');
    expect(code).toBe(0);
  });
});
