import { existsSync } from 'node:fs';
import type { Logger } from '@threadwork/platform';
import type { SessionOptions } from './harness.js';
import type { Isolation } from '../sandbox/isolation.js';
import { openGates, type GateRefusal } from '../sandbox/gates.js';
import type { ModelApi, ModelPin } from '../sandbox/model-api/dialect.js';
import { BRIDGE_PORT, EGRESS_ENV, jailed, type JailOwner } from '../sandbox/jail.js';
import { limited } from '../sandbox/limits.js';

// How any harness process is started: behind the runner's death signal, inside its sandbox's
// process and memory limits, in the jail whose only ways out are the runner's gates. Each adapter
// says what to run and how its harness names the model endpoint; this module says where it runs.

export interface Command {
  command: string;
  args: string[];
}

const SETPRIV = '/usr/bin/setpriv';

/**
 * On Linux the harness gets SIGTERM when the runner dies, even by SIGKILL (util-linux `setpriv
 * --pdeathsig`, which then execs the command, so the pid stays the harness's): a crashed runner
 * leaves no agent running on behind it.
 */
export function guarded(cmd: Command): Command {
  if (process.platform === 'linux' && existsSync(SETPRIV)) {
    return { command: SETPRIV, args: ['--pdeathsig', 'SIGTERM', '--', cmd.command, ...cmd.args] };
  }
  return cmd;
}

export interface LaunchSpec {
  /** The harness program (its own arguments are appended to `Launch.command` when it is started). */
  program: Command;
  /** Which model API the harness speaks: what the jail's model gate lets through. */
  api: ModelApi;
  /** The real model endpoint and its key. */
  baseUrl: string;
  apiKey: string | null;
  isolation: Isolation;
  session: SessionOptions;
  logger: Logger;
  /** Told of everything the jail's gates refuse. */
  refused(refusal: GateRefusal): void;
}

/** The model gate as a session needs it, wherever it runs (the jail's, a pod's bridge). */
export interface ModelGate {
  /** Bills the harness's model requests from now on as the turn about to run (its model, its run). */
  pinModel(pin: ModelPin): void;
}

export interface Launch {
  /** The gates (null unjailed): each turn pins what its model requests are billed as. */
  gates: ModelGate | null;
  /** The model endpoint as the harness must name it: the bridge inside the jail, or the real one. */
  modelBaseUrl: string;
  /**
   * The key for the harness process to hold: none when jailed (the model gate adds it outside).
   * Unjailed, the harness holds it, and must keep it from the agent's commands itself.
   */
  key: string | null;
  /** The session's scrubbed environment, plus the egress proxy's when jailed. */
  env: Record<string, string>;
  /** What to start, the harness's own arguments appended: death signal, limits, jail, program. */
  command: Command;
  /** Frees what the jail held outside it (the gates' sockets, the cgroup); once the process has exited. */
  release(): Promise<void>;
}

/** Opens the gates and makes the limits for one harness process of `spec.session`'s sandbox. */
export async function prepareLaunch(spec: LaunchSpec): Promise<Launch> {
  const { isolation, session } = spec;
  const gates = isolation.jailed
    ? await openGates({
        model: { api: spec.api, baseUrl: spec.baseUrl, apiKey: spec.apiKey, pin: { model: session.model } },
        egress: isolation.egress,
        logger: spec.logger,
        refused: spec.refused,
        owner: session.owner,
      })
    : null;
  try {
    const cmd = guarded(
      gates
        ? jailed(spec.program, {
            cwd: session.cwd,
            writable: session.mounts.writable,
            readable: session.mounts.readable,
            runDir: gates.runDir,
            tmpBytes: isolation.tmpBytes,
            owner: jailOwner(isolation, session.owner),
          })
        : spec.program,
    );
    // Inside its process limit from the first instruction: everything the jail starts counts.
    const bounded =
      gates && (isolation.processes || isolation.memory)
        ? await limited(cmd, { processes: isolation.processes, memory: isolation.memory })
        : null;
    return {
      gates,
      modelBaseUrl: gates ? `http://127.0.0.1:${BRIDGE_PORT}${gates.modelBasePath}` : spec.baseUrl,
      key: gates ? null : spec.apiKey,
      env: { ...session.env, ...(gates ? EGRESS_ENV : {}) },
      command: bounded?.command ?? cmd,
      release: async () => {
        await gates?.close();
        await bounded?.release();
      },
    };
  } catch (err) {
    await gates?.close();
    throw err;
  }
}

/** Who the sandbox's jail runs as outside: its own uid where the runner gives each one. */
function jailOwner(isolation: Isolation, uid: number | null): JailOwner | undefined {
  if (uid === null) return undefined;
  if (isolation.outside?.kind !== 'per-sandbox')
    throw new Error('a sandbox has a uid of its own, but jails do not switch uid');
  return { uid, programs: isolation.outside.programs };
}
