import type { V1Pod } from '@kubernetes/client-node';
import type { SandboxStatus } from '@threadwork/contracts';

// A sandbox's status as its pod shows it. Pure, so every case is tested without a cluster.

export interface PodState {
  status: SandboxStatus;
  /** Why it failed (or what it waits for), as the API server or the kubelet said; null when nothing is to say. */
  reason: string | null;
}

/** Container states the kubelet reports that never resolve on their own: the pod will not become Ready. */
const FATAL_WAITING = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'CrashLoopBackOff',
  'RunContainerError',
]);

/** The pod's sandbox status: `null` pod (gone) and a pod being deleted are `stopped`. */
export function podState(pod: V1Pod | null | undefined): PodState {
  if (!pod) return { status: 'stopped', reason: null };
  if (pod.metadata?.deletionTimestamp) return { status: 'stopped', reason: 'pod deleted' };
  const phase = pod.status?.phase;
  if (phase === 'Failed' || phase === 'Succeeded') {
    const why = pod.status?.reason ?? pod.status?.message ?? `pod ${phase.toLowerCase()}`;
    return { status: 'failed', reason: why };
  }
  for (const c of pod.status?.containerStatuses ?? []) {
    const waiting = c.state?.waiting;
    if (waiting?.reason && FATAL_WAITING.has(waiting.reason)) {
      return { status: 'failed', reason: waiting.message ? `${waiting.reason}: ${waiting.message}` : waiting.reason };
    }
  }
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
  if (phase === 'Running' && ready?.status === 'True') return { status: 'ready', reason: null };
  const unscheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'False');
  // Unschedulable may clear (a node joins, a volume binds): still initializing, with the reason.
  return { status: 'initializing', reason: unscheduled?.message ?? unscheduled?.reason ?? null };
}
