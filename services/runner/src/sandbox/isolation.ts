import type { Logger } from '@threadwork/platform';
import { probeCodexSandbox } from '../harness/codex/sandbox-probe.js';
import type { EgressPolicy } from './egress.js';
import { JAIL_UID, probeJail, type JailMode } from './jail.js';
import { seccompProgram } from './seccomp.js';
import { probeMemoryLimit, probeProcessLimit, type MemoryLimit, type ProcessLimit } from './limits.js';

// What stands between an agent and the machine, decided once at start-up from the settings and
// what this machine allows, and said in the runner's start log and in every run's events
// (`sandbox.ready`): the jail (bubblewrap), Codex's own sandbox around each command inside it, and
// the egress policy.

export type CodexSandboxSetting = 'auto' | 'workspace-write' | 'danger-full-access';

export interface Isolation {
  /** Harnesses run in a bubblewrap jail (sandbox/jail.ts). */
  jailed: boolean;
  /** Codex's sandbox mode for the agent's commands. */
  codexSandbox: 'workspace-write' | 'danger-full-access';
  egress: EgressPolicy;
  /** How many processes a jail may hold, and how that is enforced; null: not bounded here. */
  processes: ProcessLimit | null;
  /** How much memory a jail may hold (its /tmp included); null: not bounded here. */
  memory: MemoryLimit | null;
  /** Size bound of a jail's /tmp. */
  tmpBytes: number;
  /** The layers in force, by name, outermost first. */
  layers: string[];
}

export interface IsolationSettings {
  jail: JailMode;
  codexSandbox: CodexSandboxSetting;
  egress: EgressPolicy;
  /** Where sandboxes live (the Codex sandbox probe runs there). */
  root: string;
  pidsMax: number;
  /** 0: no memory limit of the runner's own. */
  memoryMaxBytes: number;
  tmpBytes: number;
}

export async function decideIsolation(settings: IsolationSettings, logger: Logger): Promise<Isolation> {
  const jailed = await decideJail(settings.jail, logger);
  const codexSandbox = await decideCodexSandbox(settings, jailed, logger);
  const processes = jailed ? await decideProcessLimit(settings.pidsMax, logger) : null;
  const memory = jailed && settings.memoryMaxBytes > 0 ? await decideMemoryLimit(settings.memoryMaxBytes, logger) : null;
  const layers = jailed
    ? [
        'bubblewrap-jail',
        'own-mount-pid-ipc-uts-namespaces',
        'no-network-but-gates',
        `user-namespace-uid-${JAIL_UID}-no-capabilities`,
        ...(seccompProgram() ? ['seccomp-no-ptrace-no-io-uring'] : []),
        'model-key-outside',
        `egress-${settings.egress.mode}`,
        ...(processes ? [`pids-max-${processes.max}-${processes.method}`] : []),
        ...(memory ? [`memory-max-${Math.floor(memory.maxBytes / 2 ** 20)}mib-cgroup`] : []),
        `tmp-max-${Math.floor(settings.tmpBytes / 2 ** 20)}mib`,
      ]
    : ['none-runner-user'];
  if (codexSandbox === 'workspace-write') layers.push('codex-workspace-write');
  const isolation: Isolation = {
    jailed,
    codexSandbox,
    egress: settings.egress,
    processes,
    memory,
    tmpBytes: settings.tmpBytes,
    layers,
  };
  logger.info(
    { layers, egress: settings.egress.mode, egress_allow: settings.egress.allow },
    jailed
      ? 'sandboxes are jailed: the agent sees its workspace only, no network but the runner’s gates, no secrets'
      : 'sandboxes are NOT jailed',
  );
  return isolation;
}

async function decideJail(mode: JailMode, logger: Logger): Promise<boolean> {
  if (mode === 'off') {
    logger.warn(
      'SANDBOX_JAIL=off: harnesses and the agent run as the runner itself, with its file system and network — for development only',
    );
    return false;
  }
  const probe = await probeJail();
  if (probe.ok) return true;
  if (mode === 'required') throw new Error(`SANDBOX_JAIL=required, but ${probe.reason}`);
  logger.warn(
    { reason: probe.reason },
    'NO JAIL: harnesses and the agent run as the runner itself, with its file system and network (SANDBOX_JAIL=auto)',
  );
  return false;
}

async function decideProcessLimit(max: number, logger: Logger): Promise<ProcessLimit | null> {
  const probe = await probeProcessLimit(max);
  if (probe.ok) return probe.limit;
  logger.warn(
    { reason: probe.reason },
    'jails have no process limit of their own here: the pod’s or the machine’s is all that stops a fork bomb',
  );
  return null;
}

async function decideMemoryLimit(maxBytes: number, logger: Logger): Promise<MemoryLimit | null> {
  const probe = await probeMemoryLimit(maxBytes);
  if (probe.ok) return probe.limit;
  logger.warn(
    { reason: probe.reason },
    'jails have no memory limit of their own here: the pod’s or the machine’s is all that bounds an agent’s allocations',
  );
  return null;
}

async function decideCodexSandbox(
  settings: IsolationSettings,
  jailed: boolean,
  logger: Logger,
): Promise<Isolation['codexSandbox']> {
  if (settings.codexSandbox === 'danger-full-access') return 'danger-full-access';
  const probe = await probeCodexSandbox(settings.root, jailed);
  if (probe.ok) return 'workspace-write';
  if (settings.codexSandbox === 'workspace-write') {
    throw new Error(`CODEX_SANDBOX_MODE=workspace-write, but Codex's sandbox ${probe.reason}`);
  }
  logger.warn(
    { reason: probe.reason },
    `Codex's own sandbox is not used around the agent's commands${jailed ? ' (the jail still is)' : ''}`,
  );
  return 'danger-full-access';
}
