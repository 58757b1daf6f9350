// The chart on a real Kubernetes API server (etcd, kube-apiserver with RBAC and its admission
// plugins, controllers, scheduler, and kwok nodes whose pods turn Ready without containers): what
// the offline tests cannot show — that the server accepts every object, that every workload reaches
// its replicas, that an upgrade rolls, that an upgrade which cannot work is refused before anything
// changes, and that an uninstall leaves nothing behind.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startControlPlane, waitFor, type ControlPlane } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ensureTool } from '../../deploy/local/tools.mjs';
import { controlPlaneBinaries, missingGo } from './support/binaries.js';
import { chartDir, INSECURE_MONGO, productionValues, REQUIRED } from '../deploy/support/chart.js';

const NS = 'threadwork';
const RELEASE = 'tw';
const WAIT = 300_000;

interface Meta {
  name: string;
  namespace?: string;
  generation?: number;
  labels?: Record<string, string>;
  ownerReferences?: { kind: string; name: string }[];
}
interface Obj {
  apiVersion: string;
  kind: string;
  metadata: Meta;
}
interface Workload extends Obj {
  spec: { replicas?: number; template: { spec: { containers: { name: string; image: string }[] } } };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    readyReplicas?: number;
    availableReplicas?: number;
    updatedReplicas?: number;
    currentRevision?: string;
    updateRevision?: string;
  };
}
interface List<T> {
  items: T[];
}

let plane: ControlPlane;
let scratch: string;

/** Where each kind the chart renders (and the server makes for it) lives: group/version and plural. */
const COLLECTIONS: Record<string, [string, string]> = {
  ConfigMap: ['api/v1', 'configmaps'],
  Secret: ['api/v1', 'secrets'],
  Service: ['api/v1', 'services'],
  ServiceAccount: ['api/v1', 'serviceaccounts'],
  PersistentVolumeClaim: ['api/v1', 'persistentvolumeclaims'],
  Pod: ['api/v1', 'pods'],
  Deployment: ['apis/apps/v1', 'deployments'],
  StatefulSet: ['apis/apps/v1', 'statefulsets'],
  ReplicaSet: ['apis/apps/v1', 'replicasets'],
  PodDisruptionBudget: ['apis/policy/v1', 'poddisruptionbudgets'],
  HorizontalPodAutoscaler: ['apis/autoscaling/v2', 'horizontalpodautoscalers'],
  Ingress: ['apis/networking.k8s.io/v1', 'ingresses'],
  NetworkPolicy: ['apis/networking.k8s.io/v1', 'networkpolicies'],
  Role: ['apis/rbac.authorization.k8s.io/v1', 'roles'],
  RoleBinding: ['apis/rbac.authorization.k8s.io/v1', 'rolebindings'],
};

function collection(kind: string): string {
  const where = COLLECTIONS[kind];
  if (!where) throw new Error(`no collection known for ${kind}`);
  return `/${where[0]}/namespaces/${NS}/${where[1]}`;
}

async function list<T extends Obj>(kind: string): Promise<T[]> {
  const res = await plane.api<List<T>>('GET', collection(kind));
  if (res.status !== 200) throw new Error(`listing ${kind}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.items;
}

function helm(args: string[]): { status: number | null; out: string } {
  const result = spawnSync(ensureTool('helm'), [...args, '--kubeconfig', plane.kubeconfig, '-n', NS], {
    encoding: 'utf8',
    env: {
      ...process.env,
      HELM_CACHE_HOME: join(scratch, 'cache'),
      HELM_CONFIG_HOME: join(scratch, 'config'),
      HELM_DATA_HOME: join(scratch, 'data'),
    },
  });
  return { status: result.status, out: `${result.stdout}\n${result.stderr}` };
}

function mustHelm(args: string[]): string {
  const { status, out } = helm(args);
  if (status !== 0) throw new Error(`helm ${args.join(' ')} failed:\n${out}`);
  return out;
}

/** The release's objects as helm applied them. */
function manifest(): Obj[] {
  return parseAllDocuments(mustHelm(['get', 'manifest', RELEASE]))
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null && typeof o === 'object' && 'kind' in o);
}

function releaseStatus(): { revision: number; status: string } {
  const out = JSON.parse(mustHelm(['status', RELEASE, '-o', 'json'])) as { version: number; info: { status: string } };
  return { revision: out.version, status: out.info.status };
}

/** Every Deployment and StatefulSet has all its replicas (at least its autoscaler's minimum) up to date and available. */
async function workloadsSettled(expectImage?: string): Promise<boolean> {
  const autoscalers = await list<Obj & { spec: { minReplicas: number; scaleTargetRef: { name: string } } }>(
    'HorizontalPodAutoscaler',
  );
  const floor = new Map(autoscalers.map((a) => [a.spec.scaleTargetRef.name, a.spec.minReplicas]));
  const deployments = await list<Workload>('Deployment');
  const statefulSets = await list<Workload>('StatefulSet');
  if (deployments.length === 0 || statefulSets.length === 0) return false;
  for (const w of [...deployments, ...statefulSets]) {
    const want = w.spec.replicas ?? 1;
    const s = w.status ?? {};
    if (want < (floor.get(w.metadata.name) ?? 0)) return false;
    if ((s.observedGeneration ?? 0) < (w.metadata.generation ?? 0)) return false;
    if (s.replicas !== want || s.readyReplicas !== want || s.updatedReplicas !== want) return false;
    if (w.kind === 'Deployment' && s.availableReplicas !== want) return false;
    if (w.kind === 'StatefulSet' && s.currentRevision !== s.updateRevision) return false;
    if (expectImage && w.spec.template.spec.containers.some((c) => !c.image.endsWith(expectImage))) return false;
  }
  const pods = await list<Obj & { spec: { containers: { image: string }[] }; status?: { phase?: string } }>('Pod');
  // A rolled workload leaves no pod of the old template behind.
  if (expectImage && pods.some((p) => p.spec.containers.some((c) => !c.image.endsWith(expectImage)))) return false;
  return pods.every((p) => p.status?.phase === 'Running');
}

async function generations(): Promise<Record<string, number>> {
  const all = [...(await list<Workload>('Deployment')), ...(await list<Workload>('StatefulSet'))];
  return Object.fromEntries(all.map((w) => [`${w.kind}/${w.metadata.name}`, w.metadata.generation ?? 0]));
}

/** Secrets the release reads but does not create (values-production.yaml names them), as an operator makes them. */
async function createReferencedSecrets(objects: Obj[]): Promise<void> {
  const wanted = new Map<string, Set<string>>();
  const add = (name: string, key: string) => wanted.set(name, (wanted.get(name) ?? new Set()).add(key));
  JSON.stringify(objects, (key, value: unknown) => {
    if (key === 'secretKeyRef' && value && typeof value === 'object') {
      const ref = value as { name: string; key: string };
      add(ref.name, ref.key);
    }
    if (key === 'secret' && value && typeof value === 'object' && 'secretName' in value) {
      add((value as { secretName: string }).secretName, 'ca.crt');
    }
    return value;
  });
  const created = new Set(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name));
  for (const [name, keys] of wanted) {
    if (created.has(name)) continue;
    const data = Object.fromEntries([...keys].map((k) => [k, Buffer.from(`placeholder ${k}`).toString('base64')]));
    const res = await plane.api('POST', `/api/v1/namespaces/${NS}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name },
      data,
    });
    if (res.status !== 201 && res.status !== 409) throw new Error(`secret ${name}: ${res.status}`);
  }
}

function rendered(args: string[]): Obj[] {
  const out = mustHelm(['template', RELEASE, chartDir, '--kube-version', '1.37.2', ...args]);
  return parseAllDocuments(out)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null && typeof o === 'object' && 'kind' in o);
}

const DEFAULTS = [...REQUIRED, ...INSECURE_MONGO];
const PRODUCTION = ['-f', productionValues];

describe.skipIf(missingGo)('the chart on a real API server', () => {
  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'threadwork-helm-'));
    plane = await startControlPlane({ binaries: controlPlaneBinaries() });
    // No provisioner: the runners' claims bind to volumes made beforehand, as on a cluster without
    // dynamic provisioning. Larger than any claim here, and more than the runners need.
    for (let i = 0; i < 8; i++) {
      const res = await plane.api('POST', '/api/v1/persistentvolumes', {
        apiVersion: 'v1',
        kind: 'PersistentVolume',
        metadata: { name: `pv-${i}` },
        spec: {
          capacity: { storage: '500Gi' },
          accessModes: ['ReadWriteOnce'],
          persistentVolumeReclaimPolicy: 'Retain',
          storageClassName: '',
          hostPath: { path: `/var/lib/pv-${i}` },
        },
      });
      expect(res.status).toBe(201);
    }
    const ns = await plane.api('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: NS },
    });
    expect(ns.status).toBe(201);
    await createReferencedSecrets([...rendered(DEFAULTS), ...rendered(PRODUCTION)]);
  }, 900_000);

  afterAll(async () => {
    await plane?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('installs with the default values and every workload reaches its replicas', async () => {
    mustHelm(['install', RELEASE, chartDir, ...DEFAULTS]);
    await waitFor('every workload to be available', () => workloadsSettled(), WAIT, { intervalMs: 500 });
    expect(releaseStatus()).toEqual({ revision: 1, status: 'deployed' });
  });

  it('refuses, before changing anything, an upgrade that would change the runners’ volume claims or the event log’s streams, or make sandboxes in a namespace that admits privileged pods', async () => {
    const before = await generations();
    const { status, out } = helm(['upgrade', RELEASE, chartDir, ...PRODUCTION]);
    expect(status).not.toBe(0);
    expect(out).toContain('runner.persistence.size cannot change from "20Gi" to "100Gi"');
    expect(releaseStatus()).toEqual({ revision: 1, status: 'deployed' });
    expect(await generations()).toEqual(before);
    // Nor may the run event log's stream count change (a run's log stays in the stream it hashed to).
    const shards = helm(['upgrade', RELEASE, chartDir, ...DEFAULTS, '--set', 'nats.runEventShards=8']);
    expect(shards.status).not.toBe(0);
    expect(shards.out).toContain('nats.runEventShards cannot change from 16 to 8');
    expect(releaseStatus()).toEqual({ revision: 1, status: 'deployed' });
    expect(await generations()).toEqual(before);
    // Nor a sandbox namespace made beforehand that does not refuse privileged pods: the runner's
    // Role there could make one.
    const agents = await plane.api('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'agents' },
    });
    expect(agents.status).toBe(201);
    const sandboxes = [
      '--set',
      'runner.sandbox.provider=kubernetes',
      '--set',
      'runner.sandbox.kubernetes.image=registry.example.com/sandbox:1',
      '--set',
      'runner.sandbox.kubernetes.createNamespace=false',
      '--set',
      'runner.sandbox.kubernetes.namespace=agents',
      '--set',
      'runner.sandbox.kubernetes.apiServerEgress.to[0].ipBlock.cidr=10.96.0.1/32',
    ];
    const unlabelled = helm(['upgrade', RELEASE, chartDir, ...DEFAULTS, ...sandboxes]);
    expect(unlabelled.status).not.toBe(0);
    expect(unlabelled.out).toContain(
      'runner.sandbox.kubernetes.namespace "agents" must enforce the restricted Pod Security Standard',
    );
    expect(releaseStatus()).toEqual({ revision: 1, status: 'deployed' });
    expect(await generations()).toEqual(before);
    // The same size written another way is no change.
    mustHelm(['upgrade', RELEASE, chartDir, ...DEFAULTS, '--set', 'runner.persistence.size=20480Mi']);
    expect(releaseStatus()).toEqual({ revision: 2, status: 'deployed' });
  });

  it('upgrades to the production values once the StatefulSet is replaced as the chart’s README says', async () => {
    // The README's way: the StatefulSet goes with its pods orphaned, the upgrade makes the new one.
    const orphan = await plane.api('DELETE', `${collection('StatefulSet')}/${runnerName()}`, {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      propagationPolicy: 'Orphan',
    });
    expect(orphan.status).toBe(200);
    await waitFor('the StatefulSet to be gone', async () => (await list('StatefulSet')).length === 0, WAIT);
    mustHelm(['upgrade', RELEASE, chartDir, ...PRODUCTION]);
    expect(releaseStatus()).toEqual({ revision: 3, status: 'deployed' });
    await waitFor('every workload to reach its production replicas', () => workloadsSettled(), WAIT, {
      intervalMs: 500,
    });
    // Every object of the release is on the server as rendered, policies included.
    const objects = manifest();
    const kinds = new Set(objects.map((o) => o.kind));
    expect(kinds).toContain('NetworkPolicy');
    expect(kinds).toContain('PodDisruptionBudget');
    expect(kinds).toContain('HorizontalPodAutoscaler');
    for (const o of objects) {
      const res = await plane.api('GET', `${collection(o.kind)}/${o.metadata.name}`);
      expect(res.status, `${o.kind}/${o.metadata.name}`).toBe(200);
    }
  });

  it('rolls every workload to a new image tag', async () => {
    mustHelm(['upgrade', RELEASE, chartDir, ...PRODUCTION, '--set', 'image.tag=0.1.1']);
    await waitFor('every workload to roll to 0.1.1', () => workloadsSettled(':0.1.1'), WAIT, { intervalMs: 500 });
    expect(releaseStatus()).toEqual({ revision: 4, status: 'deployed' });
  });

  it('uninstalls and leaves nothing but the runners’ workspaces', async () => {
    const objects = manifest();
    mustHelm(['uninstall', RELEASE, '--wait']);
    for (const o of objects) {
      const res = await plane.api('GET', `${collection(o.kind)}/${o.metadata.name}`);
      expect(res.status, `${o.kind}/${o.metadata.name}`).toBe(404);
    }
    await waitFor(
      'the pods and replica sets to be collected',
      async () => (await list('Pod')).length === 0 && (await list('ReplicaSet')).length === 0,
      WAIT,
      { intervalMs: 500 },
    );
    // Workspaces outlive the release on purpose (persistentVolumeClaimRetentionPolicy: Retain).
    const claims = await list('PersistentVolumeClaim');
    expect(claims.length).toBeGreaterThan(0);
    for (const c of claims) expect(c.metadata.name).toMatch(new RegExp(`^workspaces-${runnerName()}-\\d+$`));
    // Nothing else of ours: only what the server makes in every namespace.
    expect((await list('ConfigMap')).map((c) => c.metadata.name)).toEqual(['kube-root-ca.crt']);
    const secrets = await list('Secret');
    expect(secrets.some((s) => s.metadata.labels?.['app.kubernetes.io/instance'] === RELEASE)).toBe(false);
    expect(secrets.some((s) => s.metadata.name.startsWith('sh.helm.release'))).toBe(false);
  });
});

function runnerName(): string {
  return `${RELEASE}-threadwork-runner`;
}
