import { readFileSync } from 'node:fs';
import { chmod, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '@threadwork/platform';
import { probeCodexSandbox } from '../harness/codex/sandbox-probe.js';
import type { EgressPolicy } from './egress.js';
import { JAIL_UID, probeJail, type JailMode, type JailOwner } from './jail.js';
import { seccompProgram } from './seccomp.js';
import { probeMemoryLimit, probeProcessLimit, type MemoryLimit, type ProcessLimit } from './limits.js';
import {
  missingCapabilities,
  passableByOthers,
  probeUid,
  rangeOverlaps,
  unmappedProblem,
  type UidRange,
} from './uids.js';

// What stands between an agent and the machine, decided once at start-up from the settings and
// what this machine allows, and said in the runner's start log and in every run's events
// (`sandbox.ready`): the jail (bubblewrap), who its processes are outside it, Codex's own sandbox
// around each command inside it, and the egress policy.

/** Where programs the sandboxes' uids cannot reach where they are are linked, under SANDBOX_ROOT. */
const PROGRAMS = '.jail-programs';

/**
 * Who a jail's processes are outside it: each sandbox's own uid from the range (the runner runs as
 * root and can switch to it), or the runner's own user (it cannot: it is not root, or, root, it
 * could not make the switch work here and SANDBOX_JAIL=auto let it go on).
 */
export type OutsideUser = { kind: 'per-sandbox'; range: UidRange; programs: string } | { kind: 'runner'; uid: number };

export type CodexSandboxSetting = 'auto' | 'workspace-write' | 'danger-full-access';

export interface Isolation {
  /** Harnesses run in a bubblewrap jail (sandbox/jail.ts). */
  jailed: boolean;
  /** Codex's sandbox mode for the agent's commands. */
  codexSandbox: 'workspace-write' | 'danger-full-access';
  egress: EgressPolicy;
  /** Who a jail's processes are outside it (null: not jailed). */
  outside: OutsideUser | null;
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
  /** Where each sandbox's uid comes from, where the runner runs as root (SANDBOX_UID_RANGE). */
  uidRange: UidRange;
  /** The harnesses the runner serves: what guards the harness's memory depends on the harness. */
  harnesses: readonly string[];
}

/**
 * Claude Code has no sandbox of its own around the agent's commands here: only Yama keeps them out
 * of its memory (decidePtraceGuards says why that matters). Where there is none, SANDBOX_JAIL=required
 * refuses to serve it.
 */
export function decideClaudePtraceGuard(jail: JailMode, yama: number | null, logger: Logger): void {
  if (yama !== null && yama >= 1) return;
  const problem =
    `Claude Code's commands would run beside it as its uid with nothing to keep them out of its memory (/proc/<pid>/mem): ` +
    (yama === null
      ? 'the kernel has no Yama (kernel.yama.ptrace_scope absent)'
      : `Yama is off (kernel.yama.ptrace_scope=${yama})`);
  if (jail === 'required') {
    throw new Error(
      `SANDBOX_JAIL=required, but ${problem}. Set kernel.yama.ptrace_scope=1 on the host, or serve only codex`,
    );
  }
  logger.warn(`HARNESS MEMORY OPEN TO THE AGENT (claude-code): ${problem} (SANDBOX_JAIL=auto)`);
}

/**
 * The layers around one harness's runs: Codex's own sandbox, and the memory guard it makes, are
 * Codex's alone.
 */
export function layersFor(isolation: Isolation, harness: string): string[] {
  if (harness === 'codex') return isolation.layers;
  const codexOnly = new Set([
    'codex-workspace-write',
    'harness-memory-guard-codex-sandbox',
    'harness-memory-UNGUARDED',
  ]);
  const guarded = isolation.layers.some((layer) => layer.startsWith('harness-memory-guard-yama'));
  return isolation.layers
    .flatMap((layer) => {
      if (!codexOnly.has(layer)) return [layer];
      // Where the guard stood, the one this harness has (Yama's, already listed) or none.
      return layer === 'codex-workspace-write' || guarded ? [] : ['harness-memory-UNGUARDED'];
    })
    .filter((layer, i, all) => all.indexOf(layer) === i);
}

export async function decideIsolation(settings: IsolationSettings, logger: Logger): Promise<Isolation> {
  const jailed = await decideJail(settings.jail, logger);
  const outside = jailed ? await decideOutsideUser(settings, logger) : null;
  const probeOwner: JailOwner | undefined =
    outside?.kind === 'per-sandbox' ? { uid: probeUid(outside.range), programs: outside.programs } : undefined;
  const codexSandbox = await decideCodexSandbox(settings, jailed, probeOwner, logger);
  const yama = yamaPtraceScope();
  const ptraceGuards =
    jailed && settings.harnesses.includes('codex') ? decidePtraceGuards(settings, codexSandbox, yama, logger) : [];
  if (jailed && settings.harnesses.includes('claude-code')) decideClaudePtraceGuard(settings.jail, yama, logger);
  const processes = jailed ? await decideProcessLimit(settings.pidsMax, outside, logger) : null;
  const memory =
    jailed && settings.memoryMaxBytes > 0 ? await decideMemoryLimit(settings.memoryMaxBytes, logger) : null;
  const layers = jailed
    ? [
        'bubblewrap-jail',
        'own-mount-pid-ipc-uts-namespaces',
        'no-network-but-gates',
        `user-namespace-uid-${JAIL_UID}-no-capabilities`,
        outside?.kind === 'per-sandbox' ? 'outside-uid-per-sandbox' : `outside-uid-runner-${outside?.uid}`,
        ...(seccompProgram() ? ['seccomp-no-ptrace-no-io-uring'] : []),
        ...(ptraceGuards.length > 0
          ? ptraceGuards.map((guard) => `harness-memory-guard-${guard}`)
          : ['harness-memory-UNGUARDED']),
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
    outside,
    processes,
    memory,
    tmpBytes: settings.tmpBytes,
    layers,
  };
  logger.info(
    {
      layers,
      egress: settings.egress.mode,
      egress_allow: settings.egress.allow,
      ...(outside?.kind === 'per-sandbox'
        ? { outside_uid_range: `${outside.range.first}-${outside.range.last}` }
        : outside
          ? { outside_uid: outside.uid }
          : {}),
    },
    jailed
      ? 'sandboxes are jailed: the agent sees its workspace only, no network but the runner’s gates, no secrets'
      : 'sandboxes are NOT jailed',
  );
  return isolation;
}

/** `kernel.yama.ptrace_scope` (0 to 3); null where the kernel has no Yama. */
export function yamaPtraceScope(file = '/proc/sys/kernel/yama/ptrace_scope'): number | null {
  try {
    const scope = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(scope) ? scope : null;
  } catch {
    return null;
  }
}

/**
 * What keeps the agent's commands out of the harness's memory. Inside the jail they share the
 * harness's uid, and the kernel lets a process open another of its uid's `/proc/<pid>/mem` for
 * writing (an attach, as ptrace, which the jail's seccomp filter refuses, but by another way):
 * Codex's own process, holding the conversation, or the jail's init, holding the runner's channel
 * to it, would be the agent's. Two things stop that: Codex's sandbox around each command (its start-
 * up probe checks that a command under it cannot open the harness's memory), or Yama's ptrace
 * restriction on the host (scope 1 and up: none of them is the agent's descendant). Where neither
 * holds, SANDBOX_JAIL=required refuses to start. PR_SET_DUMPABLE would not do: the harness's exec
 * resets it, and bubblewrap sets it on its init.
 */
export function decidePtraceGuards(
  settings: Pick<IsolationSettings, 'jail' | 'codexSandbox'>,
  codexSandbox: Isolation['codexSandbox'],
  yama: number | null,
  logger: Logger,
): string[] {
  const guards: string[] = [];
  if (codexSandbox === 'workspace-write') guards.push('codex-sandbox');
  if (yama !== null && yama >= 1) guards.push(`yama-ptrace-scope-${yama}`);
  if (guards.length > 0) return guards;
  const problem =
    `the agent's commands would run beside the harness as its uid with nothing to keep them out of its memory (/proc/<pid>/mem): ` +
    `Codex's own sandbox is not used around them (CODEX_SANDBOX_MODE=${settings.codexSandbox}) and the kernel has ` +
    (yama === null ? 'no Yama (kernel.yama.ptrace_scope absent)' : `Yama off (kernel.yama.ptrace_scope=${yama})`);
  if (settings.jail === 'required') {
    throw new Error(
      `SANDBOX_JAIL=required, but ${problem}. Use Codex's sandbox (CODEX_SANDBOX_MODE=workspace-write, where nested user namespaces work and SANDBOX_ROOT is outside /tmp) or set kernel.yama.ptrace_scope=1 on the host`,
    );
  }
  logger.warn(`HARNESS MEMORY OPEN TO THE AGENT: ${problem} (SANDBOX_JAIL=auto)`);
  return guards;
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

/**
 * Who jails run as outside. The runner running as root switches each to its sandbox's uid; that
 * takes root's usual capabilities (a container's root may lack some), the range mapped in this
 * user namespace, SANDBOX_ROOT reachable by those uids (every directory above it searchable by
 * others; the root itself is made so), and bubblewrap working when started as an unprivileged user
 * (unprivileged user namespaces allowed). Where one of these fails, SANDBOX_JAIL=required refuses
 * to start: jails would be root outside them.
 */
async function decideOutsideUser(settings: IsolationSettings, logger: Logger): Promise<OutsideUser> {
  const uid = process.getuid?.() ?? -1;
  if (uid !== 0) {
    logger.info(
      { outside_uid: uid },
      `the runner is not root: jails run as its own user (uid ${uid}) outside them, which cannot switch to a uid per sandbox (SANDBOX_UID_RANGE applies to a runner running as root)`,
    );
    return { kind: 'runner', uid };
  }
  const range = settings.uidRange;
  const programs = join(settings.root, PROGRAMS);
  const missing = missingCapabilities();
  const problem =
    (missing.length > 0 ? `it lacks ${missing.join(', ')}` : null) ??
    unmappedProblem(range) ??
    (await rootProblem(settings.root)) ??
    (await probeJail({ uid: probeUid(range), programs }).then((probe) => (probe.ok ? null : probe.reason)));
  if (!problem) {
    const overlaps = rangeOverlaps(range);
    if (overlaps.length > 0) {
      logger.warn(
        { uid_range: `${range.first}-${range.last}`, overlaps },
        'SANDBOX_UID_RANGE holds ids this machine gives others: a sandbox sharing one would share its files with them',
      );
    }
    return { kind: 'per-sandbox', range, programs };
  }
  if (settings.jail === 'required') {
    throw new Error(
      `SANDBOX_JAIL=required and the runner runs as root, but jails cannot run as a uid of their own: ${problem}`,
    );
  }
  logger.warn(
    { reason: problem },
    'jails run as ROOT outside them: the runner runs as root and cannot give each sandbox a uid of its own (SANDBOX_JAIL=auto)',
  );
  return { kind: 'runner', uid };
}

/** Why the sandboxes' uids could not reach SANDBOX_ROOT, once let through the root itself; null when they can. */
async function rootProblem(root: string): Promise<string | null> {
  const mode = (await stat(root)).mode;
  if (!(mode & 0o001)) await chmod(root, (mode & 0o7777) | 0o011);
  if (passableByOthers(root)) return null;
  return `SANDBOX_ROOT ${root} is below a directory other users may not pass through (no o+x): a sandbox's uid could not reach its workspace`;
}

async function decideProcessLimit(
  max: number,
  outside: OutsideUser | null,
  logger: Logger,
): Promise<ProcessLimit | null> {
  const probe = await probeProcessLimit(max, outside?.kind === 'per-sandbox');
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
  owner: JailOwner | undefined,
  logger: Logger,
): Promise<Isolation['codexSandbox']> {
  if (settings.codexSandbox === 'danger-full-access') return 'danger-full-access';
  const probe = await probeCodexSandbox(settings.root, jailed ? { owner } : null);
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
