import { createHash } from 'node:crypto';
import type { V1PersistentVolumeClaim, V1Pod } from '@kubernetes/client-node';
import { z } from 'zod';

// What the kubernetes provider asks the API server for: one pod and one volume claim per thread,
// both named from the thread id. Pure: the settings in, the objects out (tested without a cluster;
// test/cluster/sandbox-pods.test.ts shows the API server accepts them).
//
// The agent in the pod is hostile, so the pod holds nothing it could use against anyone else: no
// service account token, no environment but HOME, no Secret or ConfigMap, no host path, no port;
// non-root with no capability, a read-only root, writable only its workspace volume and /tmp. It
// meets the Pod Security Standard `restricted`, which the sandbox namespace enforces.

/** A Kubernetes quantity (`500m`, `4Gi`, `1e3`), as resources and volume sizes are written. */
export const Quantity = z
  .string()
  .regex(
    /^(\d+(\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+)?$/,
    'must be a Kubernetes quantity (e.g. 500m, 4Gi)',
  );

const ResourceList = z.partialRecord(z.enum(['cpu', 'memory', 'ephemeral-storage']), Quantity);

export const ResourceRequirements = z.strictObject({
  requests: ResourceList.optional(),
  limits: ResourceList.optional(),
});
export type ResourceRequirements = z.infer<typeof ResourceRequirements>;

export const Toleration = z.strictObject({
  key: z.string().optional(),
  operator: z.enum(['Exists', 'Equal']).optional(),
  value: z.string().optional(),
  effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
  tolerationSeconds: z.number().int().optional(),
});
export type Toleration = z.infer<typeof Toleration>;

/** The settings of the sandbox pods (RunnerConfig SANDBOX_K8S_*). */
export interface PodSettings {
  namespace: string;
  image: string;
  resources: ResourceRequirements;
  runtimeClassName: string | null;
  nodeSelector: Record<string, string>;
  tolerations: Toleration[];
  volumeSize: string;
  storageClassName: string | null;
  tmpSize: string;
  /** Where the workspace volume is mounted (WORKSPACE by default). */
  workspace?: string;
}

/** The label every object of the provider carries: what a runner lists and watches. */
export const MANAGED_BY = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'threadwork-runner';
/** The label naming the thread by its key (a label value cannot hold every thread id). */
export const THREAD_KEY_LABEL = 'threadwork.dev/thread-key';
/** The annotation holding the thread id itself, as a restarted runner reads it back. */
export const THREAD_ANNOTATION = 'threadwork.dev/thread-id';
/** The one container of a sandbox pod, the one exec and attach address. */
export const CONTAINER = 'sandbox';
/** Where the workspace volume is mounted in the pod. */
export const WORKSPACE = '/workspace';
/** The agent's HOME, a folder of the workspace volume (so its dotfiles outlive the pod). */
export const HOME_FOLDER = 'home';
/** The uid (and gid) the sandbox container runs as. */
export const SANDBOX_UID = 10001;

/** The label naming the runner whose pod it is, by the key of its RUNNER_ID. */
export const RUNNER_KEY_LABEL = 'threadwork.dev/runner-key';

/** A stable key of an id, fit for a name and a label value (which cannot hold every id). */
export function textKey(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 24);
}

/** The thread's key: the same thread, the same pod. */
export function threadKey(threadId: string): string {
  return textKey(threadId);
}

/** The name of the thread's pod and of its volume claim. */
export function sandboxName(threadId: string): string {
  return `sandbox-${threadKey(threadId)}`;
}

/** The selector of every object of the provider in the namespace. */
export const MANAGED_SELECTOR = `${MANAGED_BY}=${MANAGED_BY_VALUE}`;

function metadata(threadId: string, namespace: string) {
  return {
    name: sandboxName(threadId),
    namespace,
    labels: {
      [MANAGED_BY]: MANAGED_BY_VALUE,
      'app.kubernetes.io/name': 'threadwork-sandbox',
      [THREAD_KEY_LABEL]: threadKey(threadId),
    },
    annotations: { [THREAD_ANNOTATION]: threadId },
  };
}

export function sandboxClaim(threadId: string, settings: PodSettings): V1PersistentVolumeClaim {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: metadata(threadId, settings.namespace),
    spec: {
      accessModes: ['ReadWriteOnce'],
      ...(settings.storageClassName === null ? {} : { storageClassName: settings.storageClassName }),
      resources: { requests: { storage: settings.volumeSize } },
    },
  };
}

/**
 * The container's main process only waits to be stopped: the harness and git are started in it
 * over the exec API, so nothing in the pod spec says what runs (nor carries an argument of it).
 */
const IDLE_COMMAND = ['/bin/sh', '-c', "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"];

export function sandboxPod(threadId: string, settings: PodSettings): V1Pod {
  const name = sandboxName(threadId);
  const workspace = settings.workspace ?? WORKSPACE;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: metadata(threadId, settings.namespace),
    spec: {
      // No credential of the cluster in the pod: no token mounted, no service links in its env.
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      // A sandbox pod is ended by the runner, never restarted in place with a changed spec.
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 10,
      ...(settings.runtimeClassName === null ? {} : { runtimeClassName: settings.runtimeClassName }),
      nodeSelector: settings.nodeSelector,
      tolerations: settings.tolerations,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: SANDBOX_UID,
        runAsGroup: SANDBOX_UID,
        fsGroup: SANDBOX_UID,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: CONTAINER,
          image: settings.image,
          imagePullPolicy: 'IfNotPresent',
          command: IDLE_COMMAND,
          workingDir: workspace,
          env: [{ name: 'HOME', value: `${workspace}/${HOME_FOLDER}` }],
          resources: settings.resources,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: SANDBOX_UID,
            runAsGroup: SANDBOX_UID,
            allowPrivilegeEscalation: false,
            privileged: false,
            readOnlyRootFilesystem: true,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          },
          volumeMounts: [
            { name: 'workspace', mountPath: workspace },
            { name: 'tmp', mountPath: '/tmp' },
          ],
        },
      ],
      volumes: [
        { name: 'workspace', persistentVolumeClaim: { claimName: name } },
        { name: 'tmp', emptyDir: { sizeLimit: settings.tmpSize } },
      ],
    },
  };
}
