import { hostname } from 'node:os';
import { harnessList, Id } from '@threadwork/contracts';
import { env, processConfigShape } from '@threadwork/platform';
import { z } from 'zod';
import { egressRuleProblem } from './sandbox/egress.js';
import { parseUidRange } from './sandbox/uids.js';
import { Quantity, ResourceRequirements, Toleration } from './sandbox/kubernetes/spec.js';

const MIB = 1024 * 1024;

/** A setting given as JSON (a Kubernetes object in the chart's `toJson`), parsed then checked by `schema`. */
function json<T extends z.ZodType>(schema: T, fallback: z.input<T>) {
  return z
    .string()
    .optional()
    .transform((text, ctx) => {
      if (text === undefined || text.trim() === '') return fallback;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

/** A DNS label, as Kubernetes names namespaces and RuntimeClasses. */
const DnsLabel = z
  .string()
  .max(63)
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS label (lowercase letters, digits and -)');

/** The harnesses a runner has an adapter for. */
export const SERVED_HARNESSES = ['codex', 'claude-code'] as const;

export const RunnerConfig = z
  .object({
    // No database settings: the runner never uses it, so it is never given a way in.
    ...processConfigShape,
    /**
     * Where sandboxes live (DESIGN.md section 7): `local`, a folder per thread under SANDBOX_ROOT and
     * the harness in a jail on the runner's own machine; `kubernetes`, a pod per thread in
     * SANDBOX_K8S_NAMESPACE with its workspace on a volume of its own (src/sandbox/kubernetes/).
     */
    SANDBOX_PROVIDER: z.enum(['local', 'kubernetes']).default('local'),
    /**
     * The kubernetes provider's kubeconfig file. Unset: the pod's own service account (in-cluster),
     * which the chart gives the runner only with the kubernetes provider.
     */
    SANDBOX_K8S_KUBECONFIG: z.string().min(1).optional(),
    /** The namespace of the sandbox pods and their volumes: the only one the runner's Role reaches. */
    SANDBOX_K8S_NAMESPACE: DnsLabel.default('threadwork-sandboxes'),
    /**
     * The sandbox pods' image: the harnesses, git and a `/bin/sh`, running as a non-root user. Required
     * with the kubernetes provider.
     */
    SANDBOX_K8S_IMAGE: z.string().min(1).optional(),
    /** Requests and limits of a sandbox pod's container, as JSON (`{"limits":{"cpu":"2","memory":"4Gi"}}`). */
    SANDBOX_K8S_RESOURCES: json(ResourceRequirements, {
      requests: { cpu: '250m', memory: '512Mi' },
      limits: { cpu: '2', memory: '4Gi' },
    }),
    /** A RuntimeClass for the sandbox pods (gVisor, Kata): one more boundary around the agent. Empty: the node's default. */
    SANDBOX_K8S_RUNTIME_CLASS: z
      .union([z.literal(''), DnsLabel])
      .default('')
      .transform((v) => v || null),
    /** Node labels a sandbox pod must run on, as a JSON object (`{"threadwork.dev/sandboxes":"true"}`). */
    SANDBOX_K8S_NODE_SELECTOR: json(z.record(z.string().min(1), z.string()), {}),
    /** Taints a sandbox pod tolerates, as a JSON array of Kubernetes tolerations. */
    SANDBOX_K8S_TOLERATIONS: json(z.array(Toleration), []),
    /** Size of a sandbox's workspace volume (a PersistentVolumeClaim per thread), a Kubernetes quantity. */
    SANDBOX_K8S_VOLUME_SIZE: Quantity.default('10Gi'),
    /** StorageClass of the workspace volumes. Empty: the cluster's default class. */
    SANDBOX_K8S_STORAGE_CLASS: z
      .string()
      .default('')
      .transform((v) => v || null),
    /** Size of a sandbox pod's /tmp (an emptyDir; its root filesystem is read-only), a Kubernetes quantity. */
    SANDBOX_K8S_TMP_SIZE: Quantity.default('1Gi'),
    /**
     * Where a sandbox pod's workspace volume is mounted, an absolute path: the repositories, the
     * harness's home and the agent's HOME are folders of it. Only an image that needs another place
     * for it (or a test whose stand-in pods run on its own machine) changes it.
     */
    SANDBOX_K8S_WORKSPACE: z
      .string()
      .regex(/^\/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$/, 'an absolute path of plain characters, not ending in /')
      .refine((path) => !path.split('/').some((part) => part === '..' || part === '.'), 'no . or .. in it')
      .default('/workspace'),
    /**
     * A sandbox pod with no run for this long is deleted; its volume stays, so the thread's next run
     * continues in the same workspace in a new pod. The volume goes with the thread.
     */
    SANDBOX_K8S_IDLE_MS: env.duration(30 * 60_000),
    /** Root folder of the local sandbox provider: one workspace per thread. Created if missing. */
    SANDBOX_ROOT: z.string().min(1).default('/tmp/threadwork-sandboxes'),
    /** Who claims runs (stored on the run's attempt); one per runner process. */
    RUNNER_ID: Id.default(`${hostname()}-${process.pid}`),
    /** Runs this runner works at once; each live one holds an agent process. */
    RUNNER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
    /** The harnesses this runner serves (it takes the jobs of each): `codex`, `claude-code`. */
    HARNESSES: harnessList.refine(
      (names) => names.every((name) => (SERVED_HARNESSES as readonly string[]).includes(name)),
      `a runner serves ${SERVED_HARNESSES.join(' and ')}`,
    ),
    /** Codex's model endpoint: OpenAI-compatible Responses, e.g. `http://127.0.0.1:PORT/v1`. */
    MODEL_BASE_URL: z.string().url().optional(),
    /** Key for MODEL_BASE_URL; held by the runner's model gate (or, unjailed, the harness), never logged or written. */
    MODEL_API_KEY: z.string().min(1).optional(),
    /** Claude Code's model endpoint: Anthropic Messages, e.g. `https://api.anthropic.com` (no `/v1`). */
    CLAUDE_BASE_URL: z.string().url().optional(),
    /** Key for CLAUDE_BASE_URL; kept like MODEL_API_KEY. */
    CLAUDE_API_KEY: z.string().min(1).optional(),
    /**
     * Wall-clock bound of one run, time spent waiting for the user's answer included; past it the
     * turn is interrupted (then killed) and the run fails `harness_timeout`.
     */
    RUN_TIMEOUT_MS: z.coerce
      .number()
      .int()
      .min(1_000)
      .default(30 * 60_000),
    /** Output of one command forwarded as events; the rest is dropped with a note. */
    HARNESS_OUTPUT_CAP_BYTES: z.coerce.number().int().min(1024).default(MIB),
    /** Bound of the diff a candidate revision carries (cut at a line boundary, `truncated`). */
    DIFF_MAX_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .default(256 * 1024),
    /** An agent process whose sandbox had no run for this long is stopped (the workspace stays). */
    SANDBOX_IDLE_MS: env.duration(10 * 60_000),
    /**
     * Spare sandboxes kept with their harness started (`local` provider, Codex), so that a new thread
     * of repositories the runner served lately starts in one at once (flows/warm.ts); 0: none. Each
     * is a clone on disk and an idle harness process, for SANDBOX_IDLE_MS at most.
     */
    RUNNER_WARM_SANDBOXES: z.coerce.number().int().min(0).max(16).default(1),
    /**
     * A repository mirror (`local` provider: <SANDBOX_ROOT>/.mirrors, what new clones and spares are
     * made from) that no sandbox was cloned from or brought news to for this long is removed; an
     * hour at least (a shorter one would take mirrors from under the clones made from them).
     */
    SANDBOX_MIRROR_IDLE_MS: z.coerce
      .number()
      .int()
      .min(60 * 60_000)
      .default(3 * 24 * 60 * 60_000),
    /** How often a live run's state is read back, for a cancel or an answer whose signal was missed. */
    RUN_POLL_MS: z.coerce.number().int().min(100).default(2_000),
    /**
     * Scripted demo model in-process instead of MODEL_BASE_URL and CLAUDE_BASE_URL, for both harnesses
     * (no keys needed; replies are scripted).
     */
    THREADWORK_DEMO: env.bool(false),
    /**
     * Codex's own sandbox around each command the agent runs (a second layer inside the jail):
     * `auto` uses `workspace-write` when a probe at start-up shows it confines commands here, else
     * `danger-full-access`; `workspace-write` refuses to start without it; `danger-full-access` never
     * uses it (the jail alone contains the agent). Jailed without it, the agent's commands could write
     * into the harness's memory unless the host has Yama (kernel.yama.ptrace_scope >= 1):
     * SANDBOX_JAIL=required then refuses to start (src/sandbox/isolation.ts, decidePtraceGuards).
     */
    CODEX_SANDBOX_MODE: z.enum(['auto', 'workspace-write', 'danger-full-access']).default('auto'),
    /**
     * The jail around each sandbox's harness (bubblewrap; src/sandbox/jail.ts): `required` refuses to
     * start without a working one, `auto` uses one when it works and says loudly when it does not,
     * `off` runs harnesses as the runner's own processes (development only). Default: `required`
     * with NODE_ENV=production, else `auto`.
     */
    SANDBOX_JAIL: z.enum(['required', 'auto', 'off']).optional(),
    /**
     * Where the runner runs as root, the uids a jail runs as outside it, one per sandbox (gid the
     * same, no supplementary groups; src/sandbox/uids.ts): escaped, an agent would be that user,
     * not root and not another sandbox's owner. `first-last`; the last is the runner's own for its
     * start-up probes. Choose ids no user of the machine has (nor a range of /etc/subuid), mapped
     * in the runner's user namespace (a Kubernetes pod with `hostUsers: false` maps 0-65535).
     * Unused by a runner that is not root: its jails run as its own uid (the start log says so).
     */
    SANDBOX_UID_RANGE: z
      .string()
      .default('200000-265535')
      .transform((text, ctx) => {
        const range = parseUidRange(text);
        if (typeof range === 'string') {
          ctx.addIssue({ code: 'custom', message: range });
          return z.NEVER;
        }
        return range;
      }),
    /**
     * Where a jailed agent may connect to, through the runner's egress proxy (src/sandbox/egress.ts):
     * `none` (nothing but the model), `allowlist` (the hosts of SANDBOX_EGRESS_ALLOW), `open` (any
     * public host on ports 80 and 443). Internal addresses stay closed unless a host is listed.
     */
    SANDBOX_EGRESS: z.enum(['none', 'allowlist', 'open']).default('none'),
    /** Processes (threads included) one jail may hold: a fork bomb stays inside (src/sandbox/limits.ts). */
    SANDBOX_PIDS_MAX: z.coerce.number().int().min(64).max(1_000_000).default(2048),
    /**
     * Memory one jail may hold, its /tmp included (a memory cgroup; src/sandbox/limits.ts): past it
     * the kernel stops a process of that jail, never the runner or another sandbox. 0: no limit of
     * the runner's own (the pod's or the machine's only).
     */
    SANDBOX_MEMORY_MAX_BYTES: z.coerce
      .number()
      .int()
      .refine((n) => n === 0 || n >= 128 * MIB, 'must be 0 (no limit) or at least 128 MiB')
      .default(4 * 1024 * MIB),
    /**
     * What one sandbox may hold on disk (workspaces, git, the harness's state, the agent's HOME),
     * measured every SANDBOX_DISK_CHECK_MS while a turn runs, files its jail holds unlinked included
     * (src/sandbox/disk.ts): past it the run fails `sandbox_disk_full`, nothing is committed, and the
     * next run rebuilds the workspaces. A sandbox that cannot be measured counts as past it.
     */
    SANDBOX_DISK_MAX_BYTES: z.coerce
      .number()
      .int()
      .min(MIB)
      .default(10 * 1024 * MIB),
    /**
     * Files and directories (inodes) one sandbox may hold, measured with SANDBOX_DISK_MAX_BYTES: empty
     * files take no bytes, and millions of them exhaust a disk all the same. Past it the run fails
     * `sandbox_disk_full` as it does past the bytes.
     */
    SANDBOX_DISK_MAX_INODES: z.coerce.number().int().min(1000).default(1_000_000),
    SANDBOX_DISK_CHECK_MS: env.duration(15_000),
    /** Size of a jail's own /tmp (a tmpfs: memory, counted against the runner's). */
    SANDBOX_TMP_MAX_BYTES: z.coerce
      .number()
      .int()
      .min(MIB)
      .default(512 * MIB),
    /** Comma-separated hosts for SANDBOX_EGRESS: `registry.npmjs.org,*.pythonhosted.org,git.example.com:8443`. */
    SANDBOX_EGRESS_ALLOW: z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((h) => h.trim())
          .filter(Boolean),
      )
      .superRefine((hosts, ctx) => {
        for (const host of hosts) {
          const problem = egressRuleProblem(host);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        }
      }),
    /** Keep each harness-native notification under `raw` in the run events (for debugging adapters). */
    EVENTS_INCLUDE_RAW: env.bool(false),
  })
  .superRefine((config, ctx) => {
    if (config.SANDBOX_PROVIDER === 'kubernetes' && !config.SANDBOX_K8S_IMAGE) {
      ctx.addIssue({
        code: 'custom',
        path: ['SANDBOX_K8S_IMAGE'],
        message: 'required when SANDBOX_PROVIDER=kubernetes',
      });
    }
    if (config.SANDBOX_EGRESS === 'allowlist' && config.SANDBOX_EGRESS_ALLOW.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['SANDBOX_EGRESS_ALLOW'],
        message: 'required when SANDBOX_EGRESS=allowlist',
      });
    }
  });
export type RunnerConfig = z.output<typeof RunnerConfig>;
