import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '@threadwork/platform';
import { localHome, type HarnessHome } from './home.js';
import { prepareLaunch, type Launch, type LaunchSpec } from './launch.js';
import { namespaceInit, processesOf, type ProcessIdentity, type Sweep } from './processes.js';
import { stopHarnessProcess, sweepLeftovers, type HarnessProcess } from './stopping.js';

// Where a harness process runs: what the adapters need of it, whatever the sandbox is. The adapters
// say what to run and speak their protocol over its stdio; the host opens its ways out, starts it,
// stops it, and clears away what the agent left running beside it. The local host runs it on this
// machine in the sandbox's jail (launch.ts, processes.ts, stopping.ts); a pod's runs it in the pod
// through the exec API (sandbox/kubernetes/process.ts).

export interface ProcessExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Why it could not be started at all (its binary missing): it never ran. */
  error?: string;
}

/** What a harness is started with, besides the launch's own command. */
export interface StartSpec {
  /** The harness's own arguments, appended to the launch's command. */
  args: string[];
  env: Record<string, string>;
  cwd: string;
  /**
   * Written to the process's descriptor 3, which is then closed: a secret it reads once at its
   * start, in no environment or argument its children inherit. Only where the harness holds a key.
   */
  fd3?: string;
}

/** A started harness process: its stdio, its end, and how to kill it. */
export interface HostedProcess extends HarnessProcess {
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Resolves once it has exited, with how. */
  readonly exited: Promise<ProcessExit>;
  /** Sends `sig` to the process itself (not its group): a client's own way to end it. */
  signal(sig: NodeJS.Signals): void;
}

/**
 * The processes a harness started with, before the agent could start any: these alone outlive a
 * run. Their pids are the host's (a pod's are those of its pid namespace).
 */
export interface OwnProcesses {
  readonly processes: readonly ProcessIdentity[];
  /** The init of the jail's pid namespace, when there is one: killing it kills the jail whole. */
  readonly init: ProcessIdentity | null;
}

export interface HarnessHost {
  /** The harness's home as the runner tends it between processes (what the agent left for a start to read). */
  readonly home: HarnessHome;
  /**
   * Opens the harness's ways out (the model gate, the egress gate) and says how it is started:
   * the model endpoint as it must name it, the key it holds (none where a gate adds it), its
   * environment, its command. `Launch.release` frees the gates once the process has exited.
   */
  prepare(spec: LaunchSpec): Promise<Launch>;
  /** Starts `launch.command` with `spec.args` appended, in its own process group. */
  start(launch: Launch, spec: StartSpec): HostedProcess;
  /** What runs of the harness now: called once it is ready, before the agent has run anything. */
  ownProcesses(proc: HostedProcess): Promise<OwnProcesses>;
  /**
   * Asks the harness to exit, kills it past a grace, kills what it had started, then waits for
   * `closed` (its process gone and its gates freed) and for nothing of the agent's to run on.
   */
  stop(proc: HostedProcess, own: OwnProcesses, closed: Promise<void>, logger: Logger): Promise<void>;
  /**
   * Kills every process the agent left running, keeping `own`; nothing while a turn runs. See
   * HarnessSession.stopLeftovers for what an unsettled sweep means.
   */
  sweepLeftovers(proc: HostedProcess, own: OwnProcesses, turnRunning: boolean): Promise<Sweep>;
}

/** The harness on this machine, in its sandbox's jail (or none, where isolation says so). */
export function localHost(): HarnessHost {
  return {
    home: localHome,
    prepare: prepareLaunch,
    start(launch, spec) {
      // Its own process group, so stopping it also stops the commands it started.
      const child = spawn(launch.command.command, [...launch.command.args, ...spec.args], {
        cwd: spec.cwd,
        env: spec.env,
        stdio: ['pipe', 'pipe', 'pipe', ...(spec.fd3 !== undefined ? (['pipe'] as const) : [])],
        detached: true,
      });
      if (spec.fd3 !== undefined) (child.stdio[3] as Writable).end(spec.fd3);
      return localProcess(child);
    },
    ownProcesses(proc) {
      const processes = proc.pid === undefined ? [] : processesOf(proc.pid);
      return Promise.resolve({ processes, init: namespaceInit(processes) });
    },
    stop: (proc, own, closed, logger) => stopHarnessProcess(proc, closed, own.init, logger),
    sweepLeftovers: (proc, own, turnRunning) => sweepLeftovers(proc, own.processes, own.init, turnRunning),
  };
}

function localProcess(child: ChildProcess): HostedProcess {
  let exit: ProcessExit | undefined;
  const exited = new Promise<ProcessExit>((resolve) => {
    const markExited = (how: ProcessExit) => {
      if (exit) return;
      exit = how;
      resolve(how);
    };
    child.once('exit', (code, signal) => markExited({ code, signal }));
    // A failed spawn (binary missing) emits `error` and never `exit`.
    child.once('error', (err) => markExited({ code: null, signal: null, error: err.message }));
  });
  return {
    get pid() {
      return child.pid;
    },
    get hasExited() {
      return exit !== undefined;
    },
    stdin: child.stdin as Writable,
    stdout: child.stdout as Readable,
    stderr: child.stderr as Readable,
    exited,
    kill() {
      if (exit || child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    },
    signal(sig) {
      child.kill(sig);
    },
  };
}
