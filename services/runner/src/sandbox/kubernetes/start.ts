import type { Logger } from '@threadwork/platform';
import type { RunnerConfig } from '../../config.js';
import type { Isolation } from '../isolation.js';
import type { RepositoryCredentials, SandboxStatusPublisher } from '../provider.js';
import { kubeExec } from './exec.js';
import { bridgedGates } from './gates.js';
import { loadKubeConfig, podSettings, SandboxPods } from './pods.js';
import { podHost } from './process.js';
import { KubernetesSandboxProvider } from './provider.js';

// The runner's sandboxes as pods (SANDBOX_PROVIDER=kubernetes): the pods' lifecycle watched from
// the API server, every command and the harness itself run in them over exec, their ways out the
// runner's gates over a bridge carried by exec.

export interface KubernetesSandboxes {
  provider: KubernetesSandboxProvider;
  isolation: Isolation;
  close(): Promise<void>;
}

/**
 * What stands between the agent and the rest when it runs in a pod: the pod itself (its own
 * namespace enforcing the restricted Pod Security Standard, a NetworkPolicy denying it everything),
 * one more runtime where one is set, and the runner's gates as its only ways out.
 */
export function podIsolation(config: RunnerConfig): Isolation {
  const egress = { mode: config.SANDBOX_EGRESS, allow: config.SANDBOX_EGRESS_ALLOW };
  // Codex's own sandbox needs what a restricted pod may not have; it is used when asked for.
  const codexSandbox = config.CODEX_SANDBOX_MODE === 'workspace-write' ? 'workspace-write' : 'danger-full-access';
  return {
    jailed: false,
    codexSandbox,
    egress,
    outside: null,
    processes: null,
    memory: null,
    tmpBytes: 0,
    layers: [
      'kubernetes-pod',
      'pod-security-restricted',
      'network-policy-deny-all',
      ...(config.SANDBOX_K8S_RUNTIME_CLASS ? [`runtime-class-${config.SANDBOX_K8S_RUNTIME_CLASS}`] : []),
      'no-network-but-gates-over-exec',
      'model-key-outside',
      `egress-${egress.mode}`,
      ...(codexSandbox === 'workspace-write' ? ['codex-workspace-write'] : []),
    ],
  };
}

export async function startKubernetesSandboxes(opts: {
  config: RunnerConfig;
  logger: Logger;
  publish: SandboxStatusPublisher;
  credentials: RepositoryCredentials;
}): Promise<KubernetesSandboxes> {
  const { config, logger } = opts;
  const kubeConfig = loadKubeConfig(config.SANDBOX_K8S_KUBECONFIG);
  let provider: KubernetesSandboxProvider | null = null;
  const pods = new SandboxPods({
    kubeConfig,
    settings: podSettings(config),
    runnerId: config.RUNNER_ID,
    idleMs: config.SANDBOX_K8S_IDLE_MS,
    logger,
    onStatus: (threadId, state) => {
      provider?.podChanged(threadId, state).catch((err: unknown) => {
        logger.warn({ err, thread_id: threadId }, 'could not publish the sandbox’s status as its pod changed');
      });
    },
  });
  await pods.start();
  provider = new KubernetesSandboxProvider({
    pods,
    exec: (pod) => kubeExec(kubeConfig, pod),
    root: config.SANDBOX_ROOT,
    workspace: config.SANDBOX_K8S_WORKSPACE,
    logger,
    publish: opts.publish,
    credentials: opts.credentials,
    // A tree taken out of the pod is checked out on the runner's disk: no larger than the sandbox may be.
    collectTree: { maxBytes: config.SANDBOX_DISK_MAX_BYTES, maxEntries: config.SANDBOX_DISK_MAX_INODES },
    host: (exec, compromised) => podHost(exec, { openGates: bridgedGates(exec), compromised }),
  });
  const isolation = podIsolation(config);
  logger.info(
    { layers: isolation.layers, namespace: config.SANDBOX_K8S_NAMESPACE, egress: isolation.egress.mode },
    'sandboxes are pods',
  );
  return { provider, isolation, close: () => pods.close() };
}
