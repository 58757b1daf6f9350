import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { descendants, killTree, startTime } from './processes.js';

// Killing a harness another runner left behind: by pid and start time (a reused pid is not it),
// stopped or not, with everything it started.

const onLinux = process.platform === 'linux';
const started: ChildProcess[] = [];

/** `sh` with a `sleep` below it, in a process group of its own as a harness is. */
function harnessLike(): ChildProcess {
  const child = spawn('sh', ['-c', 'sleep 60 & wait'], { detached: true, stdio: 'ignore' });
  started.push(child);
  return child;
}

const exited = (child: ChildProcess) =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((resolve) => child.once('exit', () => resolve()));

afterEach(() => {
  for (const child of started.splice(0)) if (child.pid) killTree(child.pid, 0).catch(() => undefined);
});

describe.runIf(onLinux)('processes', () => {
  it('tells a running process by its start time, and none once it has exited', async () => {
    const child = harnessLike();
    const pid = child.pid as number;
    const time = startTime(pid);
    expect(time).toMatch(/^\d+$/);
    expect(startTime(pid)).toBe(time);
    expect(startTime(process.pid)).not.toBe(time);
    child.kill('SIGKILL');
    await exited(child);
    expect(startTime(pid)).toBeNull();
  });

  it('kills a frozen process and what it started, and returns once it has exited', async () => {
    const child = harnessLike();
    const pid = child.pid as number;
    await expect.poll(() => descendants(pid).length).toBe(1);
    const [sleeper] = descendants(pid) as [number];
    // Frozen, as a paused container's processes are: only SIGKILL reaches it.
    process.kill(pid, 'SIGSTOP');
    process.kill(sleeper, 'SIGSTOP');

    expect(await killTree(pid)).toBe(true);
    expect(startTime(pid)).toBeNull();
    await expect.poll(() => startTime(sleeper)).toBeNull();
    await exited(child);
    expect(child.signalCode).toBe('SIGKILL');
  });
});
