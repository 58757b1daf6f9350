import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { waitFor } from '@threadwork/testing';
import {
  commandLine,
  descendants,
  descendantsOf,
  killTree,
  processesOf,
  signalSame,
  startTime,
  stopAllBut,
} from './processes.js';

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

  it('signals a process found earlier only while it is still that one: a recorded pid whose start time differs is another’s', async () => {
    const child = harnessLike();
    const pid = child.pid as number;
    await expect.poll(() => descendants(pid).length).toBe(1);
    const [sleeper] = descendantsOf(pid);
    expect(sleeper?.started).toBe(startTime(sleeper!.pid));
    // The same pid, another start time: what a record of an exited process whose pid was given to
    // another looks like. It is left alone.
    const recycled = { pid: sleeper!.pid, started: String(Number(sleeper!.started) + 1) };
    expect(signalSame(recycled, 'SIGKILL')).toBe(false);
    expect(startTime(sleeper!.pid)).toBe(sleeper!.started);
    // The record that matches is signalled.
    expect(signalSame(sleeper!, 'SIGKILL')).toBe(true);
    await expect.poll(() => startTime(sleeper!.pid)).toBeNull();
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

  it('stops everything below a root, however fast it multiplies: each is frozen before the next look', async () => {
    const marker = `${process.pid}${Date.now() % 100000}`;
    // The agent's: a loop starting processes as fast as it can (a sweep that only looks once
    // misses those started while it kills), below a root that only waits, as a jail's init does.
    const root = spawn('sh', ['-c', `(while :; do sleep 62${marker} & done) & wait`], {
      detached: true,
      stdio: 'ignore',
    });
    started.push(root);
    await waitFor('the loop to have started twenty', () => matching(`62${marker}`).length > 20);
    const sweep = await stopAllBut(root.pid as number, []);
    expect(sweep.processes.length).toBeGreaterThan(20);
    expect(sweep.settled).toBe(true);
    await waitFor('every sleep of the loop to be gone', () => matching(`62${marker}`).length === 0);
    await exited(root);
  });

  it('spares the processes kept by identity only, not one that takes their name', async () => {
    const marker = `${process.pid}${Date.now() % 100000}`;
    // The harness's own child, there before the agent ran anything; then the agent's, named the same.
    const root = spawn('bash', ['-c', `sleep 64${marker} & read line; exec -a sleep sleep 64${marker} & wait`], {
      detached: true,
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    started.push(root);
    const rootPid = root.pid as number;
    await waitFor('the harness child', () => descendants(rootPid).length === 1);
    const kept = processesOf(rootPid);
    root.stdin!.end('go\n');
    const sleeps = () => matching(`64${marker}`).filter((pid) => pid !== rootPid);
    // Both named alike. (The agent's is first a fork of bash, which names the marker too, until it
    // has become `sleep`.)
    await waitFor("the agent's sleep", () => {
      const found = sleeps();
      return found.length === 2 && found.every((pid) => commandLine(pid) === `sleep 64${marker}`);
    });
    expect(await stopAllBut(rootPid, kept)).toEqual({ processes: [`sleep 64${marker}`], settled: true });
    await waitFor("the agent's sleep to be gone", () => sleeps().length === 1);
    expect(processesOf(rootPid)).toEqual(kept);
  });
});

function matching(text: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
        return cmd.includes(text) && state !== 'Z';
      } catch {
        return false;
      }
    })
    .map(Number);
}
