// The Helm chart, rendered by the pinned helm and checked offline: every object against the
// Kubernetes API schemas (kubernetes-models), then the properties the chart promises (security
// settings, probes, budgets, network policies, secrets by reference, a schema that rejects bad values).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { NATS_IDENTITIES, natsPermissions } from '@threadwork/contracts';
import { GatewayConfig } from '@threadwork/gateway';
import { newNatsKeys, plaintextNatsProblem } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { ensureTool } from '../../deploy/local/tools.mjs';
import { knownEnv, readRepoFile, repoRoot, SECRET_ENV, serviceNames } from './support.js';

const KUBE_VERSION = '1.33.0';
const chartDir = join(repoRoot, 'charts', 'threadwork');
const productionValues = join(chartDir, 'values-production.yaml');
const DEPLOYMENTS = ['gateway', 'threads', 'runs', 'repohost', 'review'];
/** Each service's MongoDB connection string, in a Secret of its own. */
const MONGO_SECRETS = DEPLOYMENTS.flatMap((name) => ['--set', `mongodb.existingSecrets.${name}=mongo-${name}`]);
/** The values without a default: everything else renders from values.yaml as it is. */
const REQUIRED = [
  '--set',
  'nats.url=nats://nats.nats.svc:4222',
  '--set',
  'nats.auth.existingSecret=threadwork-nats',
  ...MONGO_SECRETS,
];
/** A development install: one MongoDB URL without credentials for every service. */
const INSECURE_MONGO = ['--set', 'mongodb.insecure=true', '--set', 'mongodb.url=mongodb://mongo:27017/?replicaSet=rs0'];

interface Model {
  validate(): void;
}
const MODELS: Record<string, new (data: never) => Model> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
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
interface PodTemplate {
  metadata: { labels: Record<string, string> };
  spec: {
    automountServiceAccountToken?: boolean;
    securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
    containers: Container[];
    volumes?: { name: string; emptyDir?: object }[];
    topologySpreadConstraints?: { topologyKey: string; labelSelector: { matchLabels: Record<string, string> } }[];
    hostNetwork?: boolean;
    hostUsers?: boolean;
    runtimeClassName?: string;
  };
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}
interface Workload extends K8sObject {
  spec: {
    replicas?: number;
    selector: { matchLabels: Record<string, string> };
    template: PodTemplate;
    volumeClaimTemplates?: { metadata: { name: string } }[];
  };
}
interface Policy extends K8sObject {
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
const scratch = mkdtempSync(join(tmpdir(), 'threadwork-chart-'));

beforeAll(() => {
  // Built once with Go and cached (deploy/local/tools.mjs); minutes only on a fresh machine.
  helm = ensureTool('helm');
}, 600_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function runHelm(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(helm, args, { encoding: 'utf8', maxBuffer: 32 * 1024 * 1024 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function template(args: string[]): ReturnType<typeof runHelm> {
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
function valuesFile(name: string, content: object | string): string {
  const path = join(scratch, `${name}.yaml`);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
}

function render(args: string[]): K8sObject[] {
  const result = template(args);
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  return parseAllDocuments(result.stdout).flatMap((doc) => {
    expect(doc.errors).toEqual([]);
    const object = doc.toJS() as K8sObject | null;
    return object ? [object] : [];
  });
}

const byKind = <T extends K8sObject = K8sObject>(objects: K8sObject[], kind: string) =>
  objects.filter((o) => o.kind === kind) as T[];
const workloads = (objects: K8sObject[]) => [
  ...byKind<Workload>(objects, 'Deployment'),
  ...byKind<Workload>(objects, 'StatefulSet'),
];
const component = (o: { metadata: { labels?: Record<string, string> } }) =>
  o.metadata.labels?.['app.kubernetes.io/component'];
const selects = (selector: Record<string, string>, labels: Record<string, string>) =>
  Object.entries(selector).every(([key, value]) => labels[key] === value);
/** Does a policy's pod selector, labels and expressions both, select pods with these labels? */
const policySelects = (policy: Policy, labels: Record<string, string>) =>
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
const egressOf = (objects: K8sObject[], workload: Workload) =>
  byKind<Policy>(objects, 'NetworkPolicy')
    .filter((p) => policySelects(p, workload.spec.template.metadata.labels))
    .flatMap((p) => p.spec.egress ?? []);
/** The Secrets and keys a workload's container reads its environment from. */
const secretRefs = (workload: Workload) =>
  (workload.spec.template.spec.containers[0]!.env ?? []).flatMap((e) =>
    e.valueFrom?.secretKeyRef ? [{ env: e.name, ...e.valueFrom.secretKeyRef }] : [],
  );

function expectValid(objects: K8sObject[]): void {
  expect(objects.length).toBeGreaterThan(0);
  for (const object of objects) {
    const Model = MODELS[`${object.apiVersion}/${object.kind}`];
    expect(Model, `a model for ${object.apiVersion} ${object.kind}`).toBeDefined();
    expect(() => new Model!(object as never).validate(), `${object.kind} ${object.metadata.name}`).not.toThrow();
  }
}

describe('charts/threadwork', () => {
  describe('with the default values', () => {
    let objects: K8sObject[] = [];
    beforeAll(() => {
      objects = render(REQUIRED);
    });

    it('passes helm lint --strict', () => {
      const result = runHelm(['lint', '--strict', '--kube-version', KUBE_VERSION, chartDir, ...REQUIRED]);
      expect(result.stdout + result.stderr).toContain('0 chart(s) failed');
      expect(result.status).toBe(0);
    });

    it('renders only objects that are valid for the Kubernetes API', () => {
      expectValid(objects);
    });

    it('runs the five services as Deployments and the runner as a StatefulSet, each its own entry', () => {
      expect(byKind(objects, 'Deployment').map(component).sort()).toEqual([...DEPLOYMENTS].sort());
      expect(byKind(objects, 'StatefulSet').map(component)).toEqual(['runner']);
      expect([...DEPLOYMENTS, 'runner'].sort()).toEqual(serviceNames());
      for (const workload of workloads(objects)) {
        const name = component(workload)!;
        const [container] = workload.spec.template.spec.containers;
        expect(workload.spec.template.spec.containers).toHaveLength(1);
        expect(container!.args).toEqual([`services/${name}/dist/main.js`]);
        expect(selects(workload.spec.selector.matchLabels, workload.spec.template.metadata.labels)).toBe(true);
        expect(workload.spec.selector.matchLabels['app.kubernetes.io/component']).toBe(name);
      }
    });

    it('gives every pod the hardened security settings, resources and a writable /tmp only', () => {
      for (const workload of workloads(objects)) {
        const name = component(workload)!;
        const pod = workload.spec.template.spec;
        expect(pod.securityContext?.runAsNonRoot, name).toBe(true);
        expect(pod.securityContext?.runAsUser, name).toBe(10001);
        expect(pod.securityContext?.seccompProfile?.type, name).toBe('RuntimeDefault');
        expect(pod.automountServiceAccountToken, name).toBe(false);
        expect(pod.hostNetwork, name).toBeUndefined();
        for (const container of pod.containers) {
          const security = container.securityContext!;
          expect(security.runAsNonRoot, name).toBe(true);
          expect(security.runAsUser, name).toBe(10001);
          expect(security.readOnlyRootFilesystem, name).toBe(true);
          expect(security.allowPrivilegeEscalation, name).toBe(false);
          expect(security.privileged, name).toBeUndefined();
          expect(security.capabilities?.drop, name).toEqual(['ALL']);
          expect(security.capabilities?.add, name).toBeUndefined();
          // The runner's jail needs namespaces the runtime's default profiles refuse (below).
          if (name !== 'runner') {
            expect(security.seccompProfile?.type, name).toBe('RuntimeDefault');
            expect(security.procMount, name).toBeUndefined();
            expect(pod.hostUsers, name).toBeUndefined();
          }
          for (const kind of ['requests', 'limits'] as const) {
            expect(container.resources?.[kind]?.cpu, `${name} ${kind}.cpu`).toBeTruthy();
            expect(container.resources?.[kind]?.memory, `${name} ${kind}.memory`).toBeTruthy();
          }
          // With a read-only root, these are the only writable places.
          const tmp = container.volumeMounts?.find((m) => m.mountPath === '/tmp');
          expect(pod.volumes?.find((v) => v.name === tmp?.name)?.emptyDir, `${name} /tmp`).toBeDefined();
        }
        const spread = pod.topologySpreadConstraints ?? [];
        expect(
          spread.map((c) => c.topologyKey),
          name,
        ).toContain('kubernetes.io/hostname');
        for (const constraint of spread) {
          expect(selects(constraint.labelSelector.matchLabels, workload.spec.template.metadata.labels)).toBe(true);
        }
      }
    });

    it('probes each service on its own health endpoints', () => {
      for (const workload of workloads(objects)) {
        const name = component(workload)!;
        const [container] = workload.spec.template.spec.containers;
        const env = Object.fromEntries((container!.env ?? []).map((e) => [e.name, e.value]));
        const portName = name === 'gateway' ? 'http' : 'health';
        const port = container!.ports?.find((p) => p.name === portName);
        // The port the process listens on: the gateway's PORT, the others' HEALTH_PORT.
        expect(String(port?.containerPort), name).toBe(name === 'gateway' ? env.PORT : env.HEALTH_PORT);
        if (name === 'gateway') expect(port?.containerPort).toBe(8080);
        expect(container!.livenessProbe?.httpGet, name).toEqual({ path: '/healthz', port: portName });
        expect(container!.startupProbe?.httpGet, name).toEqual({ path: '/healthz', port: portName });
        expect(container!.readinessProbe?.httpGet, name).toEqual({ path: '/readyz', port: portName });
      }
    });

    it('keeps the runner’s workspaces on a volume claim per replica, at SANDBOX_ROOT', () => {
      const [runner] = byKind<Workload>(objects, 'StatefulSet');
      const [container] = runner!.spec.template.spec.containers;
      const claim = runner!.spec.volumeClaimTemplates?.[0]?.metadata.name;
      const mount = container!.volumeMounts?.find((m) => m.name === claim);
      expect(mount).toBeDefined();
      expect(container!.env?.find((e) => e.name === 'SANDBOX_ROOT')?.value).toBe(mount!.mountPath);
      expect(container!.env?.find((e) => e.name === 'RUNNER_ID')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.name');
    });

    it('has a PodDisruptionBudget for every workload', () => {
      const budgets = byKind<K8sObject & { spec: { selector: { matchLabels: Record<string, string> } } }>(
        objects,
        'PodDisruptionBudget',
      );
      for (const workload of workloads(objects)) {
        const labels = workload.spec.template.metadata.labels;
        const matching = budgets.filter((b) => selects(b.spec.selector.matchLabels, labels));
        expect(matching, component(workload)).toHaveLength(1);
      }
      expect(budgets).toHaveLength(workloads(objects).length);
    });

    it('reads shared settings from the ConfigMap, and the MongoDB URL on each service but the runner', () => {
      const [config] = byKind(objects, 'ConfigMap');
      expect(config!.data?.NATS_URL).toBe('nats://nats.nats.svc:4222');
      expect(config!.data?.MONGO_URL).toBeUndefined();
      expect(config!.data?.MONGO_DB_PREFIX).toBe('threadwork');
      for (const workload of workloads(objects)) {
        const url = workload.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'MONGO_URL');
        expect(url?.valueFrom?.secretKeyRef?.name, component(workload)).toBe(
          component(workload) === 'runner' ? undefined : `mongo-${component(workload)}`,
        );
      }
      for (const key of Object.keys(config!.data ?? {})) expect(SECRET_ENV).not.toContain(key);
      for (const workload of workloads(objects)) {
        const [container] = workload.spec.template.spec.containers;
        expect(container!.envFrom?.map((e) => e.configMapRef?.name)).toContain(config!.metadata.name);
      }
    });

    it('sets only variables each service reads', () => {
      const [config] = byKind(objects, 'ConfigMap');
      for (const workload of workloads(objects)) {
        const name = component(workload)!;
        const known = knownEnv(name);
        const [container] = workload.spec.template.spec.containers;
        const names = [...Object.keys(config!.data ?? {}), ...(container!.env ?? []).map((e) => e.name)];
        for (const variable of names) expect(known.has(variable), `${name} reads ${variable}`).toBe(true);
      }
    });

    it('references secrets by name and never inlines them', () => {
      expect(byKind(objects, 'Secret')).toEqual([]);
      const values = parse(readRepoFile('charts/threadwork/values.yaml')) as { secrets: { create: boolean } };
      expect(values.secrets.create).toBe(false);
      const referenced = new Set<string>();
      for (const workload of workloads(objects)) {
        for (const variable of workload.spec.template.spec.containers[0]!.env ?? []) {
          if (!SECRET_ENV.includes(variable.name)) continue;
          expect(variable.value, variable.name).toBeUndefined();
          expect(variable.valueFrom?.secretKeyRef?.name, variable.name).toBeTruthy();
          referenced.add(variable.name);
        }
      }
      expect([...referenced].sort()).toEqual([...SECRET_ENV].sort());
      // The gateway cannot start in production without its session secret, so that one is required.
      const gateway = workloads(objects).find((w) => component(w) === 'gateway')!;
      const session = gateway.spec.template.spec.containers[0]!.env!.find((e) => e.name === 'SESSION_SECRET');
      expect(session?.valueFrom?.secretKeyRef?.optional).toBe(false);
    });

    it('exposes only the gateway through a Service with ports', () => {
      const services = byKind<K8sObject & { spec: { ports?: object[]; clusterIP?: string } }>(objects, 'Service');
      const withPorts = services.filter((s) => (s.spec.ports ?? []).length > 0);
      expect(withPorts.map(component)).toEqual(['gateway']);
      for (const service of services.filter((s) => !withPorts.includes(s))) expect(service.spec.clusterIP).toBe('None');
      expect(byKind(objects, 'Ingress')).toEqual([]);
      expect(byKind(objects, 'HorizontalPodAutoscaler')).toEqual([]);
    });

    it('denies all traffic by default and lets in only what reaches the gateway', () => {
      const policies = byKind<Policy>(objects, 'NetworkPolicy');
      const pods = workloads(objects).map((w) => ({ name: component(w)!, labels: w.spec.template.metadata.labels }));
      const applying = (pod: { labels: Record<string, string> }) =>
        policies.filter((p) => policySelects(p, pod.labels));

      for (const pod of pods) {
        const mine = applying(pod);
        const denyAll = mine.find(
          (p) =>
            p.spec.policyTypes.includes('Ingress') &&
            p.spec.policyTypes.includes('Egress') &&
            !p.spec.ingress &&
            !p.spec.egress,
        );
        expect(denyAll, `${pod.name}: default deny`).toBeDefined();
        const ingress = mine.flatMap((p) => p.spec.ingress ?? []);
        if (pod.name === 'gateway') {
          expect(ingress).toHaveLength(1);
          expect(ingress[0]!.ports).toEqual([{ port: 'http', protocol: 'TCP' }]);
        } else {
          expect(ingress, `${pod.name} accepts no connections`).toEqual([]);
        }
        const egressPorts = mine.flatMap((p) => p.spec.egress ?? []).flatMap((rule) => rule.ports ?? []);
        for (const port of [53, 4222]) {
          expect(
            egressPorts.map((p) => p.port),
            `${pod.name} egress`,
          ).toContain(port);
        }
        // The runner never uses the database: no rule of any policy lets it reach MongoDB's port.
        expect(
          egressPorts.some((p) => p.port === 27017),
          `${pod.name} egress to MongoDB`,
        ).toBe(pod.name !== 'runner');
        expect(
          egressPorts.some((p) => p.port === 443),
          `${pod.name} egress on 443`,
        ).toBe(pod.name === 'runner' || pod.name === 'repohost');
      }
      // Every policy with ingress rules selects the gateway's pods and no others.
      for (const policy of policies.filter((p) => p.spec.ingress)) {
        const selected = pods.filter((pod) => policySelects(policy, pod.labels));
        expect(selected.map((pod) => pod.name)).toEqual(['gateway']);
      }
    });
  });

  describe('with values-production.yaml', () => {
    let objects: K8sObject[] = [];
    beforeAll(() => {
      objects = render(['-f', productionValues]);
    });

    it('passes helm lint --strict', () => {
      const result = runHelm(['lint', '--strict', '--kube-version', KUBE_VERSION, chartDir, '-f', productionValues]);
      expect(result.stdout + result.stderr).toContain('0 chart(s) failed');
      expect(result.status).toBe(0);
    });

    it('renders only objects that are valid for the Kubernetes API', () => {
      expectValid(objects);
    });

    it('autoscales every Deployment, which then leaves replicas to its autoscaler', () => {
      const autoscalers = byKind<
        K8sObject & { spec: { scaleTargetRef: { kind: string; name: string }; minReplicas: number } }
      >(objects, 'HorizontalPodAutoscaler');
      const deployments = byKind<Workload>(objects, 'Deployment');
      expect(autoscalers.map((a) => a.spec.scaleTargetRef.name).sort()).toEqual(
        deployments.map((d) => d.metadata.name).sort(),
      );
      for (const autoscaler of autoscalers) {
        expect(autoscaler.spec.scaleTargetRef.kind).toBe('Deployment');
        expect(autoscaler.spec.minReplicas).toBeGreaterThanOrEqual(2);
      }
      for (const deployment of deployments) expect(deployment.spec.replicas).toBeUndefined();
      expect(byKind<Workload>(objects, 'StatefulSet')[0]!.spec.replicas).toBeGreaterThanOrEqual(2);
    });

    it('serves the gateway through an Ingress with TLS', () => {
      const [ingress] = byKind<
        K8sObject & {
          spec: {
            tls?: { secretName: string; hosts: string[] }[];
            rules: {
              host: string;
              http: { paths: { backend: { service: { name: string; port: { name: string } } } }[] };
            }[];
          };
        }
      >(objects, 'Ingress');
      const gatewayService = byKind(objects, 'Service').find((s) => component(s) === 'gateway')!;
      expect(ingress!.spec.tls?.[0]?.hosts).toContain(ingress!.spec.rules[0]!.host);
      for (const path of ingress!.spec.rules[0]!.http.paths) {
        expect(path.backend.service).toEqual({ name: gatewayService.metadata.name, port: { name: 'http' } });
      }
    });

    it('takes MongoDB and every credential from existing Secrets, and exports telemetry', () => {
      const [config] = byKind(objects, 'ConfigMap');
      expect(config!.data?.MONGO_URL).toBeUndefined();
      expect(config!.data?.OTEL_EXPORTER_OTLP_ENDPOINT).toMatch(/^http:\/\/.+:4318$/);
      expect(byKind(objects, 'Secret')).toEqual([]);
      for (const workload of workloads(objects)) {
        const env = workload.spec.template.spec.containers[0]!.env ?? [];
        const url = env.find((e) => e.name === 'MONGO_URL');
        if (component(workload) === 'runner') expect(url).toBeUndefined();
        else expect(url?.valueFrom?.secretKeyRef?.name).toBe(`threadwork-mongodb-${component(workload)}`);
      }
      const gateway = workloads(objects).find((w) => component(w) === 'gateway')!;
      const session = gateway.spec.template.spec.containers[0]!.env!.find((e) => e.name === 'SESSION_SECRET');
      expect(session?.valueFrom?.secretKeyRef).toEqual({
        name: 'threadwork-session',
        key: 'SESSION_SECRET',
        optional: false,
      });
    });

    it('lets every service but the runner reach MongoDB, and the runner nothing of the cluster on 443', () => {
      const policies = byKind<Policy & { spec: { podSelector: { matchExpressions?: { values: string[] }[] } } }>(
        objects,
        'NetworkPolicy',
      );
      const toMongo = policies.filter((p) => (p.spec.egress ?? []).some((r) => r.ports?.some((q) => q.port === 27017)));
      expect(toMongo).toHaveLength(1);
      expect(toMongo[0]!.spec.podSelector.matchExpressions?.[0]?.values.sort()).toEqual([...DEPLOYMENTS].sort());
      const runner = policies.find((p) => p.metadata.name.endsWith('runner-egress'))!;
      const blocks = (runner.spec.egress ?? []).flatMap((r) => r.to ?? []) as {
        ipBlock?: { cidr: string; except?: string[] };
      }[];
      expect(blocks.map((b) => b.ipBlock?.except)).toEqual([
        expect.arrayContaining(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16']),
      ]);
    });

    it('narrows NATS and MongoDB egress to their namespaces and the gateway to the ingress controller', () => {
      const policies = byKind<Policy>(objects, 'NetworkPolicy');
      const rules = policies.flatMap((p) => p.spec.egress ?? []);
      for (const port of [4222, 27017]) {
        const rule = rules.find((r) => r.ports?.some((p) => p.port === port));
        expect(rule?.to?.length, `egress to ${port}`).toBeGreaterThan(0);
      }
      const ingress = policies.flatMap((p) => p.spec.ingress ?? []);
      expect(ingress).toHaveLength(1);
      expect(ingress[0]!.from?.length).toBeGreaterThan(0);
    });
  });

  describe('the runner pod', () => {
    const runnerOf = (objects: K8sObject[]) => byKind<Workload>(objects, 'StatefulSet')[0]!.spec.template.spec;
    const envOf = (pod: PodTemplate['spec']) =>
      Object.fromEntries((pod.containers[0]!.env ?? []).map((e) => [e.name, e.value]));

    it('gets what bubblewrap needs to make the jail: a user namespace, an unmasked /proc, namespaces seccomp allows', () => {
      const pod = runnerOf(render(REQUIRED));
      const security = pod.containers[0]!.securityContext!;
      expect(pod.hostUsers).toBe(false);
      expect(security.procMount).toBe('Unmasked');
      expect(security.seccompProfile?.type).toBe('Unconfined');
      expect(security.appArmorProfile?.type).toBe('Unconfined');
      // Everything else stays as hardened as every other pod.
      expect(security).toMatchObject({
        runAsNonRoot: true,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
      expect(envOf(pod)).toMatchObject({
        SANDBOX_JAIL: 'required',
        SANDBOX_EGRESS: 'none',
        SANDBOX_EGRESS_ALLOW: '',
        CODEX_SANDBOX_MODE: 'auto',
      });
    });

    it('keeps the runtime defaults with the jail off, and takes a seccomp profile of the operator’s', () => {
      const off = runnerOf(render([...REQUIRED, '--set', 'runner.jail=off']));
      expect(off.hostUsers).toBeUndefined();
      expect(off.containers[0]!.securityContext?.procMount).toBeUndefined();
      expect(off.containers[0]!.securityContext?.seccompProfile?.type).toBe('RuntimeDefault');
      expect(off.containers[0]!.securityContext?.appArmorProfile).toBeUndefined();
      const local = render([
        ...REQUIRED,
        '-f',
        valuesFile('seccomp', {
          runner: { jailPod: { seccompProfile: { type: 'Localhost', localhostProfile: 'profiles/bwrap.json' } } },
        }),
      ]);
      expectValid(local);
      expect(runnerOf(local).containers[0]!.securityContext?.seccompProfile).toEqual({
        type: 'Localhost',
        localhostProfile: 'profiles/bwrap.json',
      });
    });

    it('takes an egress allowlist, Codex’s sandbox setting and a RuntimeClass', () => {
      const objects = render([
        ...REQUIRED,
        '--set',
        'runner.egress.mode=allowlist',
        '--set',
        'runner.egress.allow={registry.npmjs.org,*.pythonhosted.org,git.example.com:8443}',
        '--set',
        'runner.codexSandbox=workspace-write',
        '--set',
        'runner.runtimeClassName=gvisor',
      ]);
      expectValid(objects);
      const pod = runnerOf(objects);
      expect(pod.runtimeClassName).toBe('gvisor');
      expect(envOf(pod)).toMatchObject({
        SANDBOX_EGRESS: 'allowlist',
        SANDBOX_EGRESS_ALLOW: 'registry.npmjs.org,*.pythonhosted.org,git.example.com:8443',
        CODEX_SANDBOX_MODE: 'workspace-write',
      });
    });
  });

  describe('NATS identities', () => {
    const seedOf = (workload: Workload) =>
      workload.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'NATS_NKEY_SEED');

    it('gives each pod its own key, from the Secret named, and no other', () => {
      const objects = render(REQUIRED);
      expect(workloads(objects).map(component).sort()).toEqual(serviceNames());
      for (const workload of workloads(objects)) {
        const seed = seedOf(workload);
        expect(seed?.valueFrom?.secretKeyRef, component(workload)).toEqual({
          name: 'threadwork-nats',
          key: component(workload),
        });
        const env = workload.spec.template.spec.containers[0]!.env ?? [];
        expect(env.filter((e) => e.name.startsWith('NATS_') && e.name !== 'NATS_NKEY_SEED')).toEqual([]);
      }
    });

    it('refuses to render without the keys, unless told NATS has no authorization (development)', () => {
      const without = template(['--set', 'nats.url=nats://nats:4222', ...MONGO_SECRETS]);
      expect(without.status).not.toBe(0);
      expect(without.stderr).toMatch(/nats\.auth\.existingSecret/);
      const insecure = render([
        '--set',
        'nats.url=nats://nats:4222',
        ...MONGO_SECRETS,
        '--set',
        'nats.auth.insecure=true',
      ]);
      for (const workload of workloads(insecure)) {
        const env = workload.spec.template.spec.containers[0]!.env ?? [];
        expect(env.find((e) => e.name === 'NATS_INSECURE')?.value).toBe('true');
        expect(seedOf(workload)).toBeUndefined();
      }
      expect(byKind(insecure, 'ConfigMap').map((c) => c.metadata.name)).not.toContain('threadwork-nats-authorization');
    });

    it('holds the grants of libs/contracts in files/nats-permissions.json', () => {
      const file = JSON.parse(readRepoFile('charts/threadwork/files/nats-permissions.json')) as unknown;
      const table = Object.fromEntries(NATS_IDENTITIES.map((identity) => [identity, natsPermissions(identity)]));
      // When this fails: npm run admin -- nats permissions > charts/threadwork/files/nats-permissions.json
      expect(file).toEqual(table);
    });

    it('renders the nats-server authorization for the public keys given, which nats-server accepts', () => {
      const keys = newNatsKeys();
      const publicKeys = Object.fromEntries(NATS_IDENTITIES.map((identity) => [identity, keys[identity].publicKey]));
      const objects = render([...REQUIRED, '-f', valuesFile('nats-keys', { nats: { auth: { publicKeys } } })]);
      expectValid(objects);
      const config = byKind(objects, 'ConfigMap').find((c) => c.metadata.name === 'threadwork-nats-authorization');
      const conf = config?.data?.['authorization.conf'];
      expect(conf).toBeDefined();
      const users = (
        JSON.parse(conf!.replace(/^authorization: /, '')) as { users: { nkey: string; permissions: unknown }[] }
      ).users;
      expect(users).toHaveLength(NATS_IDENTITIES.length);
      for (const identity of NATS_IDENTITIES) {
        const user = users.find((u) => u.nkey === keys[identity].publicKey);
        expect(user?.permissions, identity).toEqual(natsPermissions(identity));
      }
      const file = join(scratch, 'authorization.conf');
      writeFileSync(file, conf!);
      const check = spawnSync(ensureTool('nats-server'), ['-t', '-c', file], { encoding: 'utf8' });
      expect(check.status, check.stderr + check.stdout).toBe(0);

      // A key missing for one identity: named, not rendered half.
      const { runner: _runner, ...partial } = publicKeys;
      const missing = template([
        ...REQUIRED,
        '-f',
        valuesFile('nats-partial', { nats: { auth: { publicKeys: partial } } }),
      ]);
      expect(missing.status).not.toBe(0);
      expect(missing.stderr).toMatch(/nats\.auth\.publicKeys\.runner/);
    });

    it('mounts the TLS secret and points every service at it', () => {
      const objects = render([
        ...REQUIRED,
        '--set',
        'nats.url=tls://nats.nats.svc:4222',
        '--set',
        'nats.tls.existingSecret=nats-client-tls',
        '--set',
        'nats.tls.clientCertificate=true',
      ]);
      expectValid(objects);
      for (const workload of workloads(objects)) {
        const [container] = workload.spec.template.spec.containers;
        const env = Object.fromEntries((container!.env ?? []).map((e) => [e.name, e.value]));
        expect(env.NATS_TLS_CA).toBe('/etc/threadwork/nats-tls/ca.crt');
        expect(env.NATS_TLS_CERT).toBe('/etc/threadwork/nats-tls/tls.crt');
        expect(env.NATS_TLS_KEY).toBe('/etc/threadwork/nats-tls/tls.key');
        expect(container!.volumeMounts).toContainEqual({
          name: 'nats-tls',
          mountPath: '/etc/threadwork/nats-tls',
          readOnly: true,
        });
      }
    });
    it('reaches NATS as the services accept in production: over TLS in values-production.yaml, in clear only with nats.allowPlaintext', () => {
      /** What each service's start-up check says of its rendered NATS settings (null: it starts). */
      const problems = (args: string[]) => {
        const objects = render(args);
        const natsUrl = byKind(objects, 'ConfigMap').find((c) => c.data?.NATS_URL)!.data!.NATS_URL!;
        return workloads(objects).map((workload) => {
          const env = Object.fromEntries(
            (workload.spec.template.spec.containers[0]!.env ?? []).map((e) => [e.name, e.value]),
          );
          return plaintextNatsProblem(
            {
              NATS_URL: natsUrl,
              NATS_TLS_CA: env.NATS_TLS_CA,
              NATS_TLS_CERT: env.NATS_TLS_CERT,
              NATS_ALLOW_PLAINTEXT: env.NATS_ALLOW_PLAINTEXT === 'true',
            },
            'production',
          );
        });
      };
      const production = problems(['-f', productionValues, ...MONGO_SECRETS]);
      expect(production.length).toBeGreaterThan(0);
      expect(production.every((problem) => problem === null)).toBe(true);
      expect(problems(REQUIRED).every((problem) => problem !== null)).toBe(true);
      expect(problems([...REQUIRED, '--set', 'nats.allowPlaintext=true']).every((problem) => problem === null)).toBe(
        true,
      );
    });
  });

  describe('MongoDB users', () => {
    it('gives each pod its own connection string, from its own Secret, and the runner none', () => {
      const objects = render([...REQUIRED, '--set', 'mongodb.existingSecretKey=uri']);
      expectValid(objects);
      for (const workload of workloads(objects)) {
        const name = component(workload)!;
        const mongo = secretRefs(workload).filter((ref) => ref.env === 'MONGO_URL' || ref.name.startsWith('mongo-'));
        if (name === 'runner') expect(mongo, name).toEqual([]);
        else expect(mongo, name).toEqual([{ env: 'MONGO_URL', name: `mongo-${name}`, key: 'uri' }]);
        // Nor is any Secret of the database mounted as a file.
        const volumes = (workload.spec.template.spec.volumes ?? []) as { secret?: { secretName: string } }[];
        expect(
          volumes.filter((v) => v.secret?.secretName.startsWith('mongo-')),
          name,
        ).toEqual([]);
        expect(
          workload.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'MONGO_URL')?.value,
        ).toBeUndefined();
      }
      const [config] = byKind(objects, 'ConfigMap');
      expect(config!.data?.MONGO_URL).toBeUndefined();
      expect(config!.data?.MONGO_DB_PREFIX).toBe('threadwork');
    });

    it('refuses to render without a service’s Secret, naming the service and its one role', () => {
      for (const missing of DEPLOYMENTS) {
        const others = DEPLOYMENTS.filter((name) => name !== missing).flatMap((name) => [
          '--set',
          `mongodb.existingSecrets.${name}=mongo-${name}`,
        ]);
        const result = template([...REQUIRED.slice(0, 4), ...others, '--set', 'mongodb.dbPrefix=acme']);
        expect(result.status, missing).not.toBe(0);
        expect(result.stderr).toContain(`mongodb.existingSecrets.${missing}:`);
        expect(result.stderr).toContain(`readWrite on acme_${missing}`);
      }
      // values-production.yaml names every one.
      const production = template(['-f', productionValues]);
      expect(production.status, production.stderr).toBe(0);
    });

    it('gives every service the one URL without credentials only when told the database has no users', () => {
      const objects = render([...REQUIRED.slice(0, 4), ...INSECURE_MONGO]);
      expectValid(objects);
      for (const workload of workloads(objects)) {
        const url = workload.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'MONGO_URL');
        expect(url?.value, component(workload)).toBe(
          component(workload) === 'runner' ? undefined : 'mongodb://mongo:27017/?replicaSet=rs0',
        );
      }
      // A Secret named for a service wins over the shared URL.
      const mixed = render([
        ...REQUIRED.slice(0, 4),
        ...INSECURE_MONGO,
        '--set',
        'mongodb.existingSecrets.gateway=mongo-gateway',
      ]);
      const gateway = workloads(mixed).find((w) => component(w) === 'gateway')!;
      expect(secretRefs(gateway).find((ref) => ref.env === 'MONGO_URL')?.name).toBe('mongo-gateway');
    });
  });

  describe('the runner’s egress', () => {
    const runnerEgress = (objects: K8sObject[]) =>
      egressOf(objects, byKind<Workload>(objects, 'StatefulSet')[0]!) as {
        to?: { ipBlock?: { cidr: string; except?: string[] }; namespaceSelector?: object }[];
        ports?: { port: string | number }[];
      }[];

    it('excepts the cluster CIDRs from the whole address space on 443, IPv4 and IPv6 apart, and leaves narrower peers alone', () => {
      const objects = render([
        ...REQUIRED,
        '-f',
        valuesFile('cluster-cidrs', {
          networkPolicy: {
            clusterCIDRs: [
              '10.244.0.0/16',
              '10.96.0.0/12',
              '169.254.169.254/32',
              'fd00:10:244::/56',
              'fd00:10:96::/112',
            ],
            egress: {
              runner: {
                to: [
                  { ipBlock: { cidr: '0.0.0.0/0', except: ['192.168.0.0/16', '10.96.0.0/12'] } },
                  { ipBlock: { cidr: '::/0' } },
                  { ipBlock: { cidr: '140.82.112.0/20' } },
                ],
                ports: [{ port: 443, protocol: 'TCP' }],
              },
            },
          },
        }),
      ]);
      expectValid(objects);
      const policy = byKind<Policy>(objects, 'NetworkPolicy').find((p) => p.metadata.name.endsWith('runner-egress'))!;
      expect(policy.spec.egress).toEqual([
        {
          ports: [{ port: 443, protocol: 'TCP' }],
          to: [
            {
              ipBlock: {
                cidr: '0.0.0.0/0',
                except: ['192.168.0.0/16', '10.96.0.0/12', '10.244.0.0/16', '169.254.169.254/32'],
              },
            },
            { ipBlock: { cidr: '::/0', except: ['fd00:10:244::/56', 'fd00:10:96::/112'] } },
            { ipBlock: { cidr: '140.82.112.0/20' } },
          ],
        },
      ]);
    });

    it('reaches MongoDB on no port, wherever MongoDB is', () => {
      const objects = render([
        ...REQUIRED,
        '-f',
        valuesFile('mongo-atlas', {
          networkPolicy: {
            egress: {
              mongodb: {
                to: [{ ipBlock: { cidr: '198.51.100.0/24' } }],
                ports: [{ port: 27017, protocol: 'TCP' }],
              },
            },
          },
        }),
      ]);
      const rules = runnerEgress(objects);
      expect(rules.length).toBeGreaterThan(0);
      for (const rule of rules) {
        expect(rule.ports?.map((p) => p.port)).not.toContain(27017);
        // An empty `to` on a port is "anywhere": only DNS (to kube-system) and NATS (any, 4222) may be that.
        for (const peer of rule.to ?? []) expect(peer.ipBlock?.cidr).not.toBe('198.51.100.0/24');
      }
      // Every other workload of the database does reach it.
      for (const workload of workloads(objects).filter((w) => component(w) !== 'runner')) {
        const ports = egressOf(objects, workload).flatMap((r) => r.ports ?? []);
        expect(
          ports.map((p) => p.port),
          component(workload),
        ).toContain(27017);
      }
    });

    it('refuses a runner rule open to everywhere, and ::/0 without IPv6 cluster CIDRs', () => {
      const open = template([
        ...REQUIRED,
        '-f',
        valuesFile('runner-open', { networkPolicy: { egress: { runner: { to: [], ports: [{ port: 443 }] } } } }),
      ]);
      expect(open.status).not.toBe(0);
      expect(open.stderr).toContain('networkPolicy.egress.runner.to: empty allows the runner');
      const v6 = template([
        ...REQUIRED,
        '-f',
        valuesFile('runner-v6', {
          networkPolicy: { egress: { runner: { to: [{ ipBlock: { cidr: '::/0' } }], ports: [{ port: 443 }] } } },
        }),
      ]);
      expect(v6.status).not.toBe(0);
      expect(v6.stderr).toContain('networkPolicy.clusterCIDRs: name the cluster');
    });
  });

  describe('harnesses', () => {
    it('tells threads and runs which harnesses the runners serve', () => {
      const objects = render([...REQUIRED, '--set', 'harnesses={codex,claude-code}']);
      expectValid(objects);
      for (const workload of workloads(objects)) {
        const value = workload.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'HARNESSES')?.value;
        const name = component(workload)!;
        expect(value, name).toBe(['threads', 'runs'].includes(name) ? 'codex,claude-code' : undefined);
      }
    });
  });

  describe('per-user limits', () => {
    it('tells threads the limits, 0 included, and refuses a negative one', () => {
      const limitsOf = (args: string[]) => {
        const objects = render([...REQUIRED, ...args]);
        expectValid(objects);
        return workloads(objects).map((workload) => {
          const env = workload.spec.template.spec.containers[0]!.env ?? [];
          const value = (name: string) => env.find((e) => e.name === name)?.value;
          return [component(workload), value('MAX_LIVE_RUNS_PER_USER'), value('THREADS_PER_MINUTE_PER_USER')];
        });
      };
      for (const [name, live, perMinute] of limitsOf([])) {
        expect([live, perMinute], String(name)).toEqual(name === 'threads' ? ['10', '30'] : [undefined, undefined]);
      }
      const off = limitsOf(['--set', 'limits.maxLiveRunsPerUser=0', '--set', 'limits.threadsPerMinutePerUser=5']);
      expect(off.find(([name]) => name === 'threads')?.slice(1)).toEqual(['0', '5']);
      const negative = template([...REQUIRED, '--set', 'limits.maxLiveRunsPerUser=-1']);
      expect(negative.status).not.toBe(0);
      expect(negative.stderr).toMatch(/maxLiveRunsPerUser/);
    });
  });

  describe('the gateway behind a proxy', () => {
    /** Every TRUST_PROXY the gateway container gets. */
    const trustProxy = (args: string[]) =>
      workloads(render([...REQUIRED, ...args]))
        .find((w) => component(w) === 'gateway')!
        .spec.template.spec.containers[0]!.env!.filter((e) => e.name === 'TRUST_PROXY')
        .map((e) => e.value);

    it('sets TRUST_PROXY from gateway.trustProxy, in every form the gateway takes', () => {
      const forms: [string[], string][] = [
        [['--set', 'gateway.trustProxy=1'], '1'],
        [['--set', 'gateway.trustProxy=true'], 'true'],
        [['--set-string', 'gateway.trustProxy=false'], 'false'],
        [
          ['-f', valuesFile('proxies', { gateway: { trustProxy: '10.0.0.0/8, loopback,fd00::/8' } })],
          '10.0.0.0/8, loopback,fd00::/8',
        ],
        [['--set-string', 'gateway.trustProxy=192.168.1.7'], '192.168.1.7'],
      ];
      for (const [args, value] of forms) {
        expect(trustProxy(args), args.join(' ')).toEqual([value]);
        expect(GatewayConfig.shape.TRUST_PROXY.safeParse(value).success, value).toBe(true);
      }
      // Unset, none: the gateway's default believes no proxy.
      expect(trustProxy([])).toEqual([]);
      expect(trustProxy(['--set', 'gateway.trustProxy=false'])).toEqual([]);
    });

    it('has values-production.yaml believe the one proxy in front', () => {
      expect(trustProxy(['-f', productionValues])).toEqual(['1']);
    });
  });

  describe('other values', () => {
    it('renders a Secret from values only when asked to', () => {
      const objects = render([
        ...REQUIRED,
        '--set',
        'secrets.create=true',
        '--set',
        'secrets.values.SESSION_SECRET=0123456789abcdef0123456789abcdef',
      ]);
      expectValid(objects);
      const [secret] = byKind(objects, 'Secret');
      expect(secret!.stringData?.SESSION_SECRET).toBe('0123456789abcdef0123456789abcdef');
      const gateway = workloads(objects).find((w) => component(w) === 'gateway')!;
      const session = gateway.spec.template.spec.containers[0]!.env!.find((e) => e.name === 'SESSION_SECRET');
      expect(session?.valueFrom?.secretKeyRef?.name).toBe(secret!.metadata.name);
    });

    it('renders valid objects with network policies off and a model endpoint set', () => {
      const objects = render([
        ...REQUIRED,
        '--set',
        'networkPolicy.enabled=false',
        '--set',
        'runner.modelBaseUrl=https://api.openai.com/v1',
        '--set',
        'image.digest=sha256:' + 'a'.repeat(64),
      ]);
      expectValid(objects);
      expect(byKind(objects, 'NetworkPolicy')).toEqual([]);
      const [runner] = byKind<Workload>(objects, 'StatefulSet');
      const [container] = runner!.spec.template.spec.containers;
      expect(container!.env?.find((e) => e.name === 'MODEL_BASE_URL')?.value).toBe('https://api.openai.com/v1');
      expect(container!.image).toBe(`threadwork@sha256:${'a'.repeat(64)}`);
    });
  });

  describe('values.schema.json', () => {
    const rejects = (args: string[], where: RegExp) => {
      const result = template(args);
      expect(result.status).not.toBe(0);
      expect(result.stderr).toContain("values don't meet the specifications of the schema");
      expect(result.stderr).toMatch(where);
    };

    it('is JSON Schema draft-07', () => {
      const schema = JSON.parse(readRepoFile('charts/threadwork/values.schema.json')) as { $schema: string };
      expect(schema.$schema).toBe('http://json-schema.org/draft-07/schema#');
    });

    it('rejects a replica count that is not a number', () => {
      rejects([...REQUIRED, '--set-string', 'gateway.replicaCount=two'], /gateway\/replicaCount/);
    });

    it('rejects an egress mode or host it does not know', () => {
      rejects([...REQUIRED, '--set', 'runner.egress.mode=everything'], /runner\/egress\/mode/);
      rejects([...REQUIRED, '--set', 'runner.egress.allow={https://evil.example}'], /runner\/egress\/allow/);
    });

    it('requires nats.url', () => {
      rejects(['--set', 'mongodb.url=mongodb://mongo:27017/'], /nats\/url/);
    });

    it('takes mongodb.url only with mongodb.insecure, and a Secret per service of the database only', () => {
      const nats = ['--set', 'nats.url=nats://nats:4222', '--set', 'nats.auth.existingSecret=threadwork-nats'];
      rejects([...nats, '--set', 'mongodb.insecure=true'], /mongodb/);
      rejects([...REQUIRED, '--set', 'mongodb.existingSecrets.runner=mongo-runner'], /existingSecrets/);
      rejects([...REQUIRED, '--set', 'mongodb.existingSecret=mongo-url'], /existingSecret/);
      rejects([...REQUIRED, '--set', 'mongodb.existingSecrets.gateway=Not_A_Name'], /existingSecrets\/gateway/);
    });

    it('rejects a cluster CIDR that is not one', () => {
      rejects([...REQUIRED, '--set', 'networkPolicy.clusterCIDRs={10.0.0.0/8,cluster.local}'], /clusterCIDRs/);
      rejects([...REQUIRED, '--set', 'networkPolicy.clusterCIDRs={10.0.0.0/33}'], /clusterCIDRs/);
    });

    it('takes TRUST_PROXY only as gateway.trustProxy, and only in a form the gateway takes', () => {
      rejects([...REQUIRED, '--set-string', 'gateway.env.TRUST_PROXY=1'], /gateway\/env/);
      rejects([...REQUIRED, '--set-string', 'gateway.trustProxy=proxy.example'], /gateway\/trustProxy/);
      rejects([...REQUIRED, '--set', 'gateway.trustProxy=-1'], /gateway\/trustProxy/);
      rejects([...REQUIRED, '--set-string', 'gateway.trustProxy=10.0.0.0/8;rm'], /gateway\/trustProxy/);
    });

    it('rejects a public key that is not an NKEY user key', () => {
      rejects([...REQUIRED, '--set', 'nats.auth.publicKeys.runner=SUAB'], /publicKeys\/runner/);
      rejects([...REQUIRED, '--set', 'nats.auth.publicKeys.intruder=UAB'], /publicKeys/);
    });

    it('rejects a numeric image tag, a bad quantity, an unknown enum value and a misspelt key', () => {
      rejects([...REQUIRED, '-f', valuesFile('float-tag', 'image:\n  tag: 1.2\n')], /image\/tag/);
      rejects([...REQUIRED, '--set', 'runner.resources.limits.memory=lots'], /runner\/resources\/limits\/memory/);
      rejects([...REQUIRED, '--set', 'logLevel=loud'], /logLevel/);
      rejects([...REQUIRED, '--set', 'gateway.replicas=2'], /replicas/);
      rejects(
        [...REQUIRED, '-f', valuesFile('no-limits', { threads: { resources: { limits: null } } })],
        /threads\/resources/,
      );
    });
  });
});
