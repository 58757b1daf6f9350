import { mkdtempSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { createLogger } from '@threadwork/platform';
import { uniqueId, waitFor } from '@threadwork/testing';
import { afterAll, describe, expect, it } from 'vitest';
import type { HostedProcess, OwnProcesses } from '../../harness/host.js';
import type { Launch, LaunchSpec } from '../../harness/launch.js';
import { localExec, type PodExec } from './exec.js';
import { podHost, type OpenPodGates, type PodGates, type PodHostOptions } from './process.js';

// A harness in a pod, with a local stand-in for the pod (localExec): a real program started
// through the pod host, talked to over its stdio, its pid read from the pod, stopped there, and the
// processes it leaves behind swept. The stand-in shares this machine's pid namespace, so sweeps
// look only below the harness.

const logger = createLogger({ service: 'pod-process-test', level: 'silent' });
/**
 * The stand-in pod is this machine: a sweep or a kill of all of the whole pod (root 0) must never
 * run here, whatever a test gets wrong.
 */
const local = localExec();
const exec: PodExec = {
  run(argv, io) {
    const script = argv[2] ?? '';
    const podWide = script.includes('echo settled') || script.includes('kill -s KILL -- -1');
    if (podWide && !/^[1-9]\d*$/.test(argv[4] ?? ''))
      return Promise.reject(new Error(`refused to sweep the machine (root ${argv[4]})`));
    return local.run(argv, io);
  },
};
const cwd = mkdtempSync('/var/tmp/threadwork-pod-process-');
const KEY = `sk-pod-${uniqueId('key')}`;

afterAll(() => rmSync(cwd, { recursive: true, force: true }));

/**
 * The harness: echoes lines, answers its pid, starts sleeps below itself, and exits on SIGTERM
 * (unless told to ignore it).
 */
const HARNESS = `
const { spawn } = require('node:child_process');
const ignoreTerm = process.argv.includes('--ignore-term');
process.on('SIGTERM', () => { if (!ignoreTerm) process.exit(0); });
require('node:readline').createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'pid') return process.stdout.write('pid ' + process.pid + ' cwd ' + process.cwd() + ' env ' + Object.keys(process.env).sort().join(',') + '\\n');
  if (line === 'hold') {
    // Left to the machine's init with this process's stdout: the exec's stream stays open with it.
    return void spawn('sh', ['-c', 'sleep 600 & echo "held $!"'], { stdio: ['ignore', 'inherit', 'ignore'] });
  }
  if (line === 'spawn') {
    const kids = [
      spawn('sleep', ['600'], { stdio: 'ignore' }),
      spawn('sleep', ['601'], { stdio: 'ignore', detached: true }),
      spawn('sh', ['-c', 'sleep 602 & wait'], { stdio: 'ignore' }),
    ];
    return process.stdout.write('spawned ' + kids.map((k) => k.pid).join(' ') + '\\n');
  }
  process.stdout.write('echo ' + line + '\\n');
});
`;

/** Gates as the bridge would give them: what they were opened with is kept. */
function gates(modelBaseUrl = 'http://127.0.0.1:18080/v1') {
  const opened: Parameters<OpenPodGates>[0][] = [];
  let closed = 0;
  const open: OpenPodGates = (options) => {
    opened.push(options);
    const gate: PodGates = {
      modelBaseUrl,
      env: { HTTPS_PROXY: 'http://127.0.0.1:18081' },
      pinModel: () => undefined,
      close: () => {
        closed++;
        return Promise.resolve();
      },
    };
    return Promise.resolve(gate);
  };
  return { open, opened, closed: () => closed };
}

function launchSpec(): LaunchSpec {
  return {
    program: { command: process.execPath, args: ['-e', HARNESS] },
    api: 'responses',
    baseUrl: 'https://models.example/v1',
    apiKey: KEY,
    isolation: {
      jailed: false,
      codexSandbox: 'danger-full-access',
      egress: { mode: 'none', allow: [] },
      outside: null,
      processes: null,
      memory: null,
      tmpBytes: 0,
      layers: [],
    },
    session: {
      cwd,
      home: cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: cwd },
      model: 'gpt-test',
      resumeSessionId: null,
      mounts: { writable: [cwd], readable: [] },
      owner: null,
      host: undefined as never,
    },
    logger,
    refused: () => undefined,
  };
}

/** Reads the process's stdout a line at a time. */
function lines(proc: HostedProcess) {
  const queue: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  createInterface({ input: proc.stdout }).on('line', (line) => {
    const next = waiting.shift();
    if (next) next(line);
    else queue.push(line);
  });
  return {
    next: () => (queue.length > 0 ? Promise.resolve(queue.shift()!) : new Promise<string>((r) => waiting.push(r))),
  };
}

/** Whether a process with this pid is there (and not a zombie), looked at through the stand-in pod. */
async function runs(pid: number): Promise<boolean> {
  const { code } = await exec.run([
    '/bin/sh',
    '-c',
    'grep -q "^State:[[:space:]]*[^Z[:space:]]" "/proc/$1/status"',
    'sh',
    String(pid),
  ]);
  return code === 0;
}

async function started(extraArgs: string[] = [], over: Partial<PodHostOptions> & { exec?: PodExec } = {}) {
  const gate = gates();
  const host = podHost(over.exec ?? exec, { openGates: gate.open, sweepScope: 'harness', ...over });
  const launch: Launch = await host.prepare(launchSpec());
  const proc = host.start(launch, { args: extraArgs, env: launch.env, cwd });
  const closed = proc.exited.then(() => launch.release());
  const out = lines(proc);
  const own: OwnProcesses = await host.ownProcesses(proc);
  return { host, launch, proc, closed, out, own, gate };
}

describe('a harness in a pod', () => {
  it('is started with the gates’ endpoint and environment, and never the key', async () => {
    const gate = gates();
    const host = podHost(exec, { openGates: gate.open });
    const launch = await host.prepare(launchSpec());
    expect(gate.opened).toHaveLength(1);
    // The key goes to the gate, which stays with the runner.
    expect(gate.opened[0]!.model.apiKey).toBe(KEY);
    expect(launch.key).toBeNull();
    expect(launch.modelBaseUrl).toBe('http://127.0.0.1:18080/v1');
    expect(launch.env).toEqual({
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: cwd,
      HTTPS_PROXY: 'http://127.0.0.1:18081',
    });
    expect(JSON.stringify(launch)).not.toContain(KEY);
    expect(() => host.start(launch, { args: [], env: launch.env, cwd, fd3: KEY })).toThrow(/no secret/);
    expect(() => host.start(launch, { args: ['--key', KEY], env: launch.env, cwd })).toThrow(/key would go/);
    expect(() => host.start(launch, { args: [], env: { ...launch.env, MODEL_KEY: KEY }, cwd })).toThrow(/key would go/);
    await launch.release();
    expect(gate.closed()).toBe(1);
  });

  it('refuses a model gate that is not on a loopback port of the pod', async () => {
    const gate = gates('http://models.example:80/v1');
    const host = podHost(exec, { openGates: gate.open });
    await expect(host.prepare(launchSpec())).rejects.toThrow(/loopback/);
    expect(gate.closed()).toBe(1);
  });

  it('talks over stdio, knows its pid, keeps it through a sweep of what it left, and stops it', async () => {
    const { host, proc, closed, out, own } = await started();
    try {
      proc.stdin.write('hello\n');
      expect(await out.next()).toBe('echo hello');
      proc.stdin.write('pid\n');
      // The pid read from the pod's first line is the program's own; it runs in the cwd, with only the env given.
      expect(await out.next()).toBe(`pid ${proc.pid} cwd ${cwd} env HOME,HTTPS_PROXY,PATH`);
      expect(own.processes.map((p) => p.pid)).toEqual([proc.pid]);

      proc.stdin.write('spawn\n');
      const spawned = (await out.next()).split(' ').slice(1).map(Number);
      expect(spawned).toHaveLength(3);
      for (const pid of spawned) expect(await runs(pid)).toBe(true);

      const sweep = await host.sweepLeftovers(proc, own, false);
      expect(sweep.settled).toBe(true);
      expect(sweep.processes).toEqual(
        expect.arrayContaining(['sleep 600', 'sleep 601', 'sh -c sleep 602 & wait', 'sleep 602']),
      );
      for (const pid of spawned) expect(await runs(pid)).toBe(false);
      // The harness is kept, and still answers.
      expect(await runs(proc.pid!)).toBe(true);
      proc.stdin.write('still\n');
      expect(await out.next()).toBe('echo still');

      // Nothing is swept while a turn runs.
      proc.stdin.write('spawn\n');
      const during = (await out.next()).split(' ').slice(1).map(Number);
      expect(await host.sweepLeftovers(proc, own, true)).toEqual({ processes: [], settled: true });
      for (const pid of during) expect(await runs(pid)).toBe(true);
      expect((await host.sweepLeftovers(proc, own, false)).settled).toBe(true);
      for (const pid of during) expect(await runs(pid)).toBe(false);
    } finally {
      const pid = proc.pid!;
      await host.stop(proc, own, closed, logger);
      expect(proc.hasExited).toBe(true);
      expect(await runs(pid)).toBe(false);
    }
  });

  it('kills a harness that does not exit when asked, with what it started', async () => {
    const { host, proc, closed, out, own } = await started(['--', '--ignore-term']);
    proc.stdin.write('spawn\n');
    const spawned = (await out.next()).split(' ').slice(1).map(Number);
    const pid = proc.pid!;
    await host.stop(proc, own, closed, logger);
    expect(await runs(pid)).toBe(false);
    // Killed past the grace, as the harness was; gone once the kernel has taken them down.
    for (const child of spawned) await waitFor(`process ${child} to go`, async () => !(await runs(child)));
    const exit = await proc.exited;
    expect(exit.error).toBeUndefined();
    expect(exit.code).not.toBe(0);
  });

  it('cuts its exec off when a process it left holds the output open past its stop', async () => {
    const { host, proc, closed, out, own } = await started([], { closeWaitMs: 500 });
    proc.stdin.write('hold\n');
    const held = Number((await out.next()).split(' ')[1]);
    try {
      await host.stop(proc, own, closed, logger);
      const exit = await proc.exited;
      expect(exit.error).toBeUndefined();
      expect(await runs(proc.pid!)).toBe(false);
    } finally {
      process.kill(held, 'SIGKILL');
    }
  });

  it('kill() ends it at once, and a second start runs apart from the first', async () => {
    const first = await started();
    const second = await started();
    expect(second.proc.pid).not.toBe(first.proc.pid);
    first.proc.kill();
    await first.closed;
    expect(await runs(first.own.processes[0]!.pid)).toBe(false);
    second.proc.stdin.write('alive\n');
    expect(await second.out.next()).toBe('echo alive');
    await second.host.stop(second.proc, second.own, second.closed, logger);
  });

  describe('a pod whose agent does not let its processes go', () => {
    const isSweep = (argv: string[]) => argv[2]?.includes('echo settled') === true;
    const isKillAll = (argv: string[]) => argv[2]?.includes('kill -s KILL -- -1') === true;
    /**
     * The stand-in pod, with what the agent does to some scripts: `answers` says what runs in place
     * of the sweep or the kill of all (an agent that killed the sweep: `echo unsettled`). A kill of
     * all of the whole pod never runs here: this machine is the stand-in's pod.
     */
    function hostile(answers: { sweep?: string[]; killAll?: string[]; stall?: () => boolean }): PodExec & {
      killAlls: string[][];
    } {
      const killAlls: string[][] = [];
      return {
        killAlls,
        run(argv, io) {
          const script = argv[2] ?? '';
          if (isKillAll(argv)) killAlls.push(argv.slice(4));
          if (answers.stall?.() && !script.includes('exec env -i')) return exec.run(['sleep', '1000'], io);
          if (isSweep(argv) && answers.sweep) return exec.run(answers.sweep, io);
          if (isKillAll(argv)) {
            if (answers.killAll) return exec.run(answers.killAll, io);
            if (argv[4] === '0' || !/^[1-9]\d*$/.test(argv[4] ?? '')) throw new Error('no kill of all here');
          }
          return exec.run(argv, io);
        },
      };
    }

    it('cuts off scripts the pod never finishes: a listing fails, a sweep counts as unsettled', async () => {
      let stall = false;
      const pod = hostile({ stall: () => stall });
      const reasons: string[] = [];
      const options = { exec: pod, compromised: (reason: string) => void reasons.push(reason) };
      const { host, proc, closed, own } = await started([], options);
      // The same pod's host, quick to give up on its scripts: started with the usual deadline, which
      // a busy machine may need, and asked once the pod stalls.
      const impatient = podHost(pod, {
        ...options,
        openGates: gates().open,
        sweepScope: 'harness',
        scriptTimeoutMs: 300,
      });
      try {
        stall = true;
        await expect(impatient.ownProcesses(proc)).rejects.toThrow(/could not list the pod's processes \(exit -1\)/);
        const sweep = await impatient.sweepLeftovers(proc, own, false);
        expect(sweep.settled).toBe(false);
        // The kill of all that follows is stalled too: the pod cannot be made sure of, and is reported.
        expect(pod.killAlls).toHaveLength(1);
        expect(reasons).toEqual(['the agent’s processes in the pod could not all be killed']);
      } finally {
        stall = false;
        await host.stop(proc, own, closed, logger);
      }
    });

    it('kills everything below the harness when a sweep does not settle, frozen processes too', async () => {
      const pod = hostile({ sweep: ['echo', 'unsettled'] });
      const reasons: string[] = [];
      const { host, proc, closed, out, own } = await started([], {
        exec: pod,
        compromised: (reason) => void reasons.push(reason),
      });
      const pid = proc.pid!;
      proc.stdin.write('spawn\n');
      const spawned = (await out.next()).split(' ').slice(1).map(Number);
      process.kill(spawned[0]!, 'SIGSTOP');
      const sweep = await host.sweepLeftovers(proc, own, false);
      expect(sweep.settled).toBe(false);
      expect(pod.killAlls).toEqual([[String(pid)]]);
      for (const child of [...spawned, pid]) expect(await runs(child)).toBe(false);
      expect(reasons).toEqual([]);
      await host.stop(proc, own, closed, logger);
      expect(proc.hasExited).toBe(true);
    });

    it('after a sweep of the pod that did not settle, kills all, and reports the pod when that leaves something', async () => {
      for (const [answer, reported] of [
        ['clean', false],
        ['dirty', true],
      ] as const) {
        const pod = hostile({ sweep: ['echo', 'unsettled'], killAll: ['echo', answer] });
        const reasons: string[] = [];
        const { host, proc, closed, own } = await started([], {
          exec: pod,
          sweepScope: 'pod',
          compromised: (reason) => void reasons.push(reason),
        });
        expect((await host.sweepLeftovers(proc, own, false)).settled).toBe(false);
        expect(pod.killAlls).toEqual([['0']]);
        expect(reasons).toHaveLength(reported ? 1 : 0);
        // Stopping sweeps the pod again, which does not settle either: all killed once more.
        await host.stop(proc, own, closed, logger);
        expect(pod.killAlls).toEqual([['0'], ['0']]);
        expect(reasons).toHaveLength(reported ? 2 : 0);
      }
    });
  });
});
