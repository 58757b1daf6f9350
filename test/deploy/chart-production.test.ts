// The Helm chart with values-production.yaml: autoscaling, an Ingress with TLS, credentials from
// existing Secrets and narrowed network policies.
import { beforeAll, describe, expect, it } from 'vitest';
import {
  byKind,
  chartDir,
  KUBE_VERSION,
  component,
  DEPLOYMENTS,
  expectValid,
  productionValues,
  render,
  runHelm,
  useHelm,
  workloads,
} from './support/chart.js';
import type { K8sObject, Policy, Workload } from './support/chart.js';

useHelm();

describe('charts/threadwork', () => {
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
      // Every service reads the ConfigMap; the runs service creates the streams on three servers.
      expect(config!.data?.NATS_STREAM_REPLICAS).toBe('3');
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

    it("gives the runner both model endpoints' keys from their own Secrets, and the one list of harnesses", () => {
      const runner = byKind<Workload>(objects, 'StatefulSet')[0]!;
      const env = runner.spec.template.spec.containers[0]!.env ?? [];
      expect(env.find((e) => e.name === 'MODEL_API_KEY')?.valueFrom?.secretKeyRef?.name).toBe('threadwork-model');
      expect(env.find((e) => e.name === 'CLAUDE_API_KEY')?.valueFrom?.secretKeyRef?.name).toBe(
        'threadwork-claude-model',
      );
      const harnesses = workloads(objects).map((w) => [
        component(w),
        w.spec.template.spec.containers[0]!.env?.find((e) => e.name === 'HARNESSES')?.value,
      ]);
      expect(harnesses.filter(([, value]) => value !== undefined).sort()).toEqual(
        [
          ['runner', 'codex'],
          ['runs', 'codex'],
          ['threads', 'codex'],
        ].sort(),
      );
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
});
