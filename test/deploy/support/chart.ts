// Rendering the Helm chart with the pinned helm, and loose views of what it renders.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ConfigMap, Namespace, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { afterAll, beforeAll, expect } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ensureTool } from '../../../deploy/local/tools.mjs';
import { repoRoot } from './repo.js';

export const KUBE_VERSION = '1.33.0';
export const chartDir = join(repoRoot, 'charts', 'threadwork');
export const productionValues = join(chartDir, 'values-production.yaml');
export const DEPLOYMENTS = ['gateway', 'threads', 'runs', 'repohost', 'review'];
/** Each service's MongoDB connection string, in a Secret of its own. */
export const MONGO_SECRETS = DEPLOYMENTS.flatMap((name) => ['--set', `mongodb.existingSecrets.${name}=mongo-${name}`]);
/** The values without a default: everything else renders from values.yaml as it is. */
export const REQUIRED = [
  '--set',
  'nats.url=nats://nats.nats.svc:4222',
  '--set',
  'nats.auth.existingSecret=threadwork-nats',
  ...MONGO_SECRETS,
];
/** A development install: one MongoDB URL without credentials for every service. */
export const INSECURE_MONGO = [
  '--set',
  'mongodb.insecure=true',
  '--set',
  'mongodb.url=mongodb://mongo:27017/?replicaSet=rs0',
];

interface Model {
  validate(): void;
}
const MODELS: Record<string, new (data: never) => Model> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'v1/Namespace': Namespace,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
};

// Loose views of the rendered objects: kubernetes-models has validated their shape already.
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}
interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  args?: string[];
  ports?: { name?: string; containerPort: number }[];
  env?: EnvVar[];
  envFrom?: { configMapRef?: { name: string } }[];
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    readOnlyRootFilesystem?: boolean;
    allowPrivilegeEscalation?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
    privileged?: boolean;
    seccompProfile?: { type: string };
    appArmorProfile?: { type: string };
    procMount?: string;
  };
  volumeMounts?: { name: string; mountPath: string }[];
}
export interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: {
    automountServiceAccountToken?: boolean;
    serviceAccountName?: string;
    securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
    containers: Container[];
    volumes?: { name: string; emptyDir?: object }[];
    topologySpreadConstraints?: { topologyKey: string; labelSelector: { matchLabels: Record<string, string> } }[];
    hostNetwork?: boolean;
    hostUsers?: boolean;
    runtimeClassName?: string;
  };
}
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}
export interface Workload extends K8sObject {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: PodTemplate;
    volumeClaimTemplates?: { metadata: { name: string } }[];
  };
}
export interface Policy extends K8sObject {
  spec: {
    podSelector: {
      matchLabels?: Record<string, string>;
      matchExpressions?: { key: string; operator: string; values?: string[] }[];
    };
    policyTypes: string[];
    ingress?: { from?: object[]; ports?: { port: string | number }[] }[];
    egress?: { to?: object[]; ports?: { port: string | number; protocol?: string }[] }[];
  };
}

let helm = '';
export let scratch = '';

/** Finds the pinned helm and a scratch folder for values files; call once at the top of a test file. */
export function useHelm(): void {
  beforeAll(() => {
    // Built once with Go and cached (deploy/local/tools.mjs); minutes only on a fresh machine.
    helm = ensureTool('helm');
    scratch = mkdtempSync(join(tmpdir(), 'threadwork-chart-'));
  }, 600_000);

  afterAll(() => rmSync(scratch, { recursive: true, force: true }));
}

export function runHelm(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(helm, args, { encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

export function template(args: string[]): ReturnType<typeof runHelm> {
  return runHelm([
    'template',
    'threadwork',
    chartDir,
    '--namespace',
    'threadwork',
    '--kube-version',
    KUBE_VERSION,
    ...args,
  ]);
}

/** A values file with `content`, for values `--set` cannot express (floats, nested objects). */
export function valuesFile(name: string, content: object | string): string {
  const path = join(scratch, `${name}.yaml`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

export function render(args: string[]): K8sObject[] {
  const result = template(args);
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  return parseAllDocuments(result.stdout).flatMap((doc) => {
    expect(doc.errors).toEqual([]);
    const object = doc.toJS() as K8sObject | null;
    return object ? [object] : [];
  });
}

export const byKind = <T extends K8sObject = K8sObject>(objects: K8sObject[], kind: string) =>
  objects.filter((o) => o.kind === kind) as T[];
export const workloads = (objects: K8sObject[]) => [
  ...byKind<Workload>(objects, 'Deployment'),
  ...byKind<Workload>(objects, 'StatefulSet'),
];
export const component = (o: { metadata: { labels?: Record<string, string> } }) =>
  o.metadata.labels?.['app.kubernetes.io/component'];
export const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);
/** Does a policy's pod selector, labels and expressions both, select pods with these labels? */
export const policySelects = (policy: Policy, labels: Record<string, string>) =>
  selects(policy.spec.podSelector.matchLabels ?? {}, labels) &&
  (policy.spec.podSelector.matchExpressions ?? []).every((e) => {
    const value = labels[e.key];
    switch (e.operator) {
      case 'In':
        return value !== undefined && (e.values ?? []).includes(value);
      case 'NotIn':
        return value === undefined || !(e.values ?? []).includes(value);
      case 'Exists':
        return value !== undefined;
      case 'DoesNotExist':
        return value === undefined;
      default:
        throw new Error(`unknown selector operator ${e.operator}`);
    }
  });
/** The egress rules that apply to a workload's pods, from every policy that selects them. */
export const egressOf = (objects: K8sObject[], workload: Workload) =>
  byKind<Policy>(objects, 'NetworkPolicy')
    .filter((p) => policySelects(p, workload.spec.template.metadata.labels))
    .flatMap((p) => p.spec.egress ?? []);
/** The Secrets and keys a workload's container reads its environment from. */
export const secretRefs = (workload: Workload) =>
  (workload.spec.template.spec.containers[0]!.env ?? []).flatMap((e) =>
    e.valueFrom?.secretKeyRef ? [{ env: e.name, ...e.valueFrom.secretKeyRef }] : [],
  );

export function expectValid(objects: K8sObject[]): void {
  expect(objects.length).toBeGreaterThan(0);
  for (const object of objects) {
    const Model = MODELS[`${object.apiVersion}/${object.kind}`];
    expect(Model, `a model for ${object.apiVersion} ${object.kind}`).toBeDefined();
    expect(() => new Model!(object as never).validate(), `${object.kind} ${object.metadata.name}`).not.toThrow();
  }
}
