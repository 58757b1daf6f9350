// The Helm chart with its default values, rendered by the pinned helm and checked offline: every object
// against the Kubernetes API schemas, then the security settings, probes, budgets, secrets by reference
// and network policies it promises.
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { knownEnv, readRepoFile, SECRET_ENV, serviceNames } from './support/repo.js';
import {
  byKind,
  chartDir,
  KUBE_VERSION,
  policySelects,
  selects,
  component,
  DEPLOYMENTS,
  expectValid,
  render,
  REQUIRED,
  runHelm,
  useHelm,
  workloads,
} from './support/chart.js';
import type { K8sObject, Policy, Workload } from './support/chart.js';

useHelm();

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
      expect(config!.data?.NATS_STREAM_REPLICAS).toBe('1');
      // A new install splits the run event log into 16 streams (fixed from then on); only runs is told.
      for (const workload of workloads(objects)) {
        const shards = workload.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'RUN_EVENT_SHARDS');
        expect(shards?.value, component(workload)).toBe(component(workload) === 'runs' ? '16' : undefined);
      }
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
});
