import {
  CoreV1Api,
  makeInformer,
  type Informer,
  KubeConfig,
  type ObjectCache,
  type V1Pod,
} from '@kubernetes/client-node';
import type { SandboxStatus } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import type { RunnerConfig } from '../../config.js';
import { SandboxError } from '../provider.js';
import {
  CONTAINER,
  MANAGED_SELECTOR,
  RUNNER_KEY_LABEL,
  sandboxClaim,
  sandboxName,
  sandboxPod,
  textKey,
  THREAD_ANNOTATION,
  type PodSettings,
} from './spec.js';
import { podState, type PodState } from './status.js';

// The lifecycle of the sandbox pods of one runner: one pod and one volume claim per thread, made on
// first use (idempotently: both are named from the thread id), watched so the sandbox's status
// follows its pod, deleted after idling (the volume stays, for the thread's next run) or with the
// thread (the volume too). The pods carry the runner's key, so a restarted runner (the same
// RUNNER_ID) adopts its own and no other's; a thread that moves to another runner has its pod
// replaced, the workspace volume kept.

export interface SandboxPodsOptions {
  kubeConfig: KubeConfig;
  settings: PodSettings;
  /** Who this runner is (RUNNER_ID): its pods carry its key. */
  runnerId: string;
  /** A pod with no run for this long is deleted (SANDBOX_K8S_IDLE_MS). */
  idleMs: number;
  logger: Logger;
  /** Every change of a sandbox's status as its pod shows it. */
  onStatus?: (threadId: string, state: PodState) => void;
  /** Hang guard of waiting for a pod to become Ready (an image pull included). */
  readyTimeoutMs?: number;
}

/** Where a thread's sandbox runs: what exec and attach address. */
export interface SandboxPod {
  threadId: string;
  namespace: string;
  name: string;
  container: string;
}

function statusCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

const GONE_POLL_MS = 250;
const WATCH_RETRY_MS = 1_000;

export class SandboxPods {
  private readonly core: CoreV1Api;
  private readonly informer: Informer<V1Pod> & ObjectCache<V1Pod>;
  private readonly runnerKey: string;
  private readonly states = new Map<string, PodState>();
  private readonly idleTimers = new Map<string, NodeJS.Timeout>();
  /** Re-checked on every event of the watch. */
  private readonly waiters = new Set<() => void>();
  private retry: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly opts: SandboxPodsOptions) {
    this.core = opts.kubeConfig.makeApiClient(CoreV1Api);
    this.runnerKey = textKey(opts.runnerId);
    const namespace = opts.settings.namespace;
    const labelSelector = `${MANAGED_SELECTOR},${RUNNER_KEY_LABEL}=${this.runnerKey}`;
    this.informer = makeInformer<V1Pod>(
      opts.kubeConfig,
      `/api/v1/namespaces/${namespace}/pods`,
      () => this.core.listNamespacedPod({ namespace, labelSelector }),
      labelSelector,
    );
    this.informer.on('add', (pod) => this.observe(pod));
    this.informer.on('update', (pod) => this.observe(pod));
    this.informer.on('delete', (pod) => this.observe(pod, true));
    this.informer.on('error', (err: unknown) => {
      if (this.closed) return;
      // The watch ends on an error and does not come back by itself.
      this.opts.logger.warn({ err }, 'sandbox pod watch failed; restarting it');
      this.retry = setTimeout(() => {
        if (!this.closed) this.informer.start().catch(() => undefined);
      }, WATCH_RETRY_MS);
    });
  }

  /**
   * Starts watching this runner's pods and adopts those an earlier process of it left (a restart):
   * each is idle until a run holds it. Returns their thread ids.
   */
  async start(): Promise<string[]> {
    await this.informer.start();
    const adopted: string[] = [];
    for (const pod of this.informer.list(this.opts.settings.namespace)) {
      const threadId = pod.metadata?.annotations?.[THREAD_ANNOTATION];
      if (!threadId) continue;
      adopted.push(threadId);
      if (!pod.metadata?.deletionTimestamp) this.release(threadId);
    }
    if (adopted.length) this.opts.logger.info({ threads: adopted.length }, 'adopted sandbox pods');
    return adopted;
  }

  /** The sandbox's status as its pod last showed it; null when this runner never saw one. */
  status(threadId: string): SandboxStatus | null {
    return this.states.get(threadId)?.status ?? null;
  }

  /**
   * The thread's pod, made if missing (its volume claim too) and Ready. A pod of another runner's
   * (the thread moved) is replaced: deleted, then made again on the same volume.
   */
  async ensure(threadId: string): Promise<SandboxPod> {
    this.hold(threadId);
    const { namespace } = this.opts.settings;
    const name = sandboxName(threadId);
    await this.createIgnoringConflict(() =>
      this.core.createNamespacedPersistentVolumeClaim({ namespace, body: sandboxClaim(threadId, this.opts.settings) }),
    );
    let uid: string | undefined;
    for (;;) {
      const created = await this.createIgnoringConflict(() =>
        this.core.createNamespacedPod({ namespace, body: this.podFor(threadId) }),
      );
      if (created) {
        uid = created.metadata?.uid;
        break;
      }
      const existing = await this.read(name);
      if (!existing) continue; // deleted meanwhile: make it again
      const mine = existing.metadata?.labels?.[RUNNER_KEY_LABEL] === this.runnerKey;
      if (mine && !existing.metadata?.deletionTimestamp) {
        uid = existing.metadata?.uid;
        break;
      }
      if (!existing.metadata?.deletionTimestamp) {
        this.opts.logger.info({ thread_id: threadId, pod: name }, 'replacing the sandbox pod of another runner');
        await this.deletePod(name, existing.metadata?.uid);
      }
      await this.gone(name, existing.metadata?.uid);
    }
    if (!uid) throw new SandboxError(`sandbox pod ${name} has no uid`);
    await this.ready(name, uid);
    return { threadId, namespace, name, container: CONTAINER };
  }

  /**
   * Whether the thread's pod is still this runner's as far as the watch has seen: not deleted, not
   * replaced by another runner's (which carries another key, so it is not in this watch). Exec
   * addresses a pod by name, so a runner that lost its thread checks this before each change it
   * makes in the pod; the watch lags the API server, which leaves a window.
   */
  isOwn(threadId: string): boolean {
    const pod = this.informer.get(sandboxName(threadId), this.opts.settings.namespace);
    return pod !== undefined && !pod.metadata?.deletionTimestamp;
  }

  /** A run uses the sandbox: it is not idle. */
  hold(threadId: string): void {
    const timer = this.idleTimers.get(threadId);
    if (timer) clearTimeout(timer);
    this.idleTimers.delete(threadId);
  }

  /** The run is done with the sandbox: its pod is deleted after idling SANDBOX_K8S_IDLE_MS (its volume stays). */
  release(threadId: string): void {
    this.hold(threadId);
    const timer = setTimeout(() => {
      this.idleTimers.delete(threadId);
      this.opts.logger.info({ thread_id: threadId }, 'deleting an idle sandbox pod (its volume stays)');
      this.stopPod(threadId).catch((err: unknown) =>
        this.opts.logger.warn({ err, thread_id: threadId }, 'deleting an idle sandbox pod failed'),
      );
    }, this.opts.idleMs);
    timer.unref();
    this.idleTimers.set(threadId, timer);
  }

  /**
   * Deletes the thread's pod, keeping its volume: the next run continues in the same workspace.
   * `now`: with no grace, for a pod whose processes must not run on a moment longer.
   */
  async stopPod(threadId: string, opts: { now?: boolean } = {}): Promise<void> {
    this.hold(threadId);
    await this.deletePod(sandboxName(threadId), undefined, opts.now === true);
  }

  /** The thread is gone: its pod and its workspace volume go too. */
  async remove(threadId: string): Promise<void> {
    this.hold(threadId);
    const name = sandboxName(threadId);
    await this.deletePod(name);
    try {
      await this.core.deleteNamespacedPersistentVolumeClaim({ name, namespace: this.opts.settings.namespace });
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.retry) clearTimeout(this.retry);
    for (const timer of this.idleTimers.values()) clearTimeout(timer);
    this.idleTimers.clear();
    await this.informer.stop();
    for (const wake of this.waiters) wake();
  }

  private podFor(threadId: string): V1Pod {
    const pod = sandboxPod(threadId, this.opts.settings);
    pod.metadata!.labels![RUNNER_KEY_LABEL] = this.runnerKey;
    return pod;
  }

  private observe(pod: V1Pod, deleted = false): void {
    const threadId = pod.metadata?.annotations?.[THREAD_ANNOTATION];
    if (!threadId) return;
    const state = deleted ? podState(null) : podState(pod);
    if (deleted) this.hold(threadId);
    const before = this.states.get(threadId);
    this.states.set(threadId, state);
    if (before?.status !== state.status || before?.reason !== state.reason) {
      this.opts.onStatus?.(threadId, state);
    }
    for (const wake of [...this.waiters]) wake();
  }

  /**
   * Resolves once the watch shows the pod (this one, by uid: the watch may still hold one it
   * replaced) Ready; throws once it shows it failed or deleted.
   */
  private ready(name: string, uid: string): Promise<void> {
    const timeoutMs = this.opts.readyTimeoutMs ?? 10 * 60_000;
    return new Promise<void>((resolve, reject) => {
      const finish = (err?: Error) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        if (err) reject(err);
        else resolve();
      };
      const check = () => {
        if (this.closed) return finish(new SandboxError('the sandbox pods are closed'));
        const pod = this.informer.get(name, this.opts.settings.namespace);
        if (pod?.metadata?.uid !== uid) return; // not seen yet
        const state = podState(pod);
        if (state.status === 'ready') finish();
        else if (state.status === 'failed') finish(new SandboxError(`sandbox pod ${name} failed: ${state.reason}`));
        else if (state.status === 'stopped') finish(new SandboxError(`sandbox pod ${name} was deleted while starting`));
      };
      const timer = setTimeout(() => {
        const state = podState(this.informer.get(name, this.opts.settings.namespace));
        finish(
          new SandboxError(
            `sandbox pod ${name} not Ready after ${timeoutMs} ms${state.reason ? `: ${state.reason}` : ''}`,
          ),
        );
      }, timeoutMs);
      this.waiters.add(check);
      check();
    });
  }

  private async read(name: string): Promise<V1Pod | null> {
    try {
      return await this.core.readNamespacedPod({ name, namespace: this.opts.settings.namespace });
    } catch (err) {
      if (statusCode(err) === 404) return null;
      throw err;
    }
  }

  /** Waits until that pod (by uid) is gone from the API server: another runner's is not in this watch. */
  private async gone(name: string, uid: string | undefined): Promise<void> {
    for (;;) {
      const pod = await this.read(name);
      if (pod === null || pod.metadata?.uid !== uid) return;
      if (this.closed) throw new SandboxError('the sandbox pods are closed');
      await new Promise((resolve) => setTimeout(resolve, GONE_POLL_MS));
    }
  }

  private async deletePod(name: string, uid?: string, now = false): Promise<void> {
    try {
      await this.core.deleteNamespacedPod({
        name,
        namespace: this.opts.settings.namespace,
        // Only the pod seen, when one is named: never a newer one made meanwhile.
        ...(uid || now
          ? { body: { ...(uid ? { preconditions: { uid } } : {}), ...(now ? { gracePeriodSeconds: 0 } : {}) } }
          : {}),
      });
    } catch (err) {
      const code = statusCode(err);
      if (code !== 404 && !(uid && code === 409)) throw err;
    }
  }

  /** Runs a create; false when the object exists already. */
  private async createIgnoringConflict<T>(create: () => Promise<T>): Promise<T | null> {
    try {
      return await create();
    } catch (err) {
      if (statusCode(err) === 409) return null;
      throw err;
    }
  }
}

/** The API server's address and credentials: a kubeconfig file, or the pod's own service account. */
export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) kc.loadFromFile(file);
  else kc.loadFromCluster();
  return kc;
}

/** The sandbox pods' settings from the runner's configuration. */
export function podSettings(config: RunnerConfig): PodSettings {
  if (!config.SANDBOX_K8S_IMAGE)
    throw new SandboxError('SANDBOX_K8S_IMAGE is required with SANDBOX_PROVIDER=kubernetes');
  return {
    namespace: config.SANDBOX_K8S_NAMESPACE,
    image: config.SANDBOX_K8S_IMAGE,
    resources: config.SANDBOX_K8S_RESOURCES,
    runtimeClassName: config.SANDBOX_K8S_RUNTIME_CLASS,
    nodeSelector: config.SANDBOX_K8S_NODE_SELECTOR,
    tolerations: config.SANDBOX_K8S_TOLERATIONS,
    volumeSize: config.SANDBOX_K8S_VOLUME_SIZE,
    storageClassName: config.SANDBOX_K8S_STORAGE_CLASS,
    tmpSize: config.SANDBOX_K8S_TMP_SIZE,
    workspace: config.SANDBOX_K8S_WORKSPACE,
  };
}
