// The Helm chart with the kubernetes sandbox provider (runner.sandbox): the runner's settings, its
// own ServiceAccount and the only token, a Role in the sandbox namespace limited to what the
// provider uses, and a sandbox namespace whose pods have no network at all.
import { describe, expect, it } from 'vitest';
import { byKind, egressOf, expectValid, render, REQUIRED, template, useHelm, valuesFile } from './support/chart.js';
import type { K8sObject, Policy, Workload } from './support/chart.js';

useHelm();

const API_SERVER = { to: [{ ipBlock: { cidr: '10.0.0.1/32' } }], ports: [{ port: 443, protocol: 'TCP' }] };
const KUBERNETES = () => [
  ...REQUIRED,
  '-f',
  valuesFile('k8s-sandbox', {
    runner: {
      sandbox: {
        provider: 'kubernetes',
        kubernetes: {
          image: 'registry.example.com/threadwork-sandbox:1',
          runtimeClassName: 'gvisor',
          nodeSelector: { 'threadwork.dev/sandboxes': 'true' },
          tolerations: [{ key: 'sandboxes', operator: 'Exists', effect: 'NoSchedule' }],
          volume: { size: '20Gi', storageClassName: 'fast' },
          idleTimeoutMs: 600000,
          apiServerEgress: API_SERVER,
        },
      },
    },
  }),
];

interface Rule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}
interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

const runnerOf = (objects: K8sObject[]) => byKind<Workload>(objects, 'StatefulSet')[0]!;
const envOf = (w: Workload) =>
  Object.fromEntries((w.spec.template.spec.containers[0]!.env ?? []).map((e) => [e.name, e.value]));
const inNamespace = (objects: K8sObject[], ns: string) => objects.filter((o) => o.metadata.namespace === ns);

describe('charts/threadwork with the kubernetes sandbox provider', () => {
  it('keeps the local provider by default: no token, no Role, no sandbox namespace', () => {
    const objects = render(REQUIRED);
    const runner = runnerOf(objects);
    expect(envOf(runner).SANDBOX_PROVIDER).toBe('local');
    expect(Object.keys(envOf(runner)).filter((k) => k.startsWith('SANDBOX_K8S_'))).toEqual([]);
    expect(runner.spec.template.spec.automountServiceAccountToken).toBe(false);
    for (const kind of ['Role', 'RoleBinding', 'Namespace', 'ClusterRole', 'ClusterRoleBinding']) {
      expect(byKind(objects, kind), kind).toEqual([]);
    }
    // The jail's needs stay on the runner pod, where the agents run.
    expect(runner.spec.template.spec.hostUsers).toBe(false);
  });

  it('gives the runner its settings, and the only token, through a ServiceAccount of its own', () => {
    const objects = render(KUBERNETES());
    expectValid(objects);
    const runner = runnerOf(objects);
    const pod = runner.spec.template.spec;
    expect(envOf(runner)).toMatchObject({
      SANDBOX_PROVIDER: 'kubernetes',
      SANDBOX_K8S_NAMESPACE: 'threadwork-sandboxes',
      SANDBOX_K8S_IMAGE: 'registry.example.com/threadwork-sandbox:1',
      SANDBOX_K8S_RUNTIME_CLASS: 'gvisor',
      SANDBOX_K8S_VOLUME_SIZE: '20Gi',
      SANDBOX_K8S_STORAGE_CLASS: 'fast',
      SANDBOX_K8S_TMP_SIZE: '1Gi',
      SANDBOX_K8S_IDLE_MS: '600000',
    });
    expect(JSON.parse(envOf(runner).SANDBOX_K8S_RESOURCES!)).toEqual({
      requests: { cpu: '250m', memory: '512Mi' },
      limits: { cpu: '2', memory: '4Gi' },
    });
    expect(JSON.parse(envOf(runner).SANDBOX_K8S_NODE_SELECTOR!)).toEqual({ 'threadwork.dev/sandboxes': 'true' });
    expect(JSON.parse(envOf(runner).SANDBOX_K8S_TOLERATIONS!)).toEqual([
      { key: 'sandboxes', operator: 'Exists', effect: 'NoSchedule' },
    ]);
    expect(pod.automountServiceAccountToken).toBe(true);
    expect(pod.serviceAccountName).toBe('threadwork-runner');
    // No agent runs in the runner pod now: it needs nothing the jail needs.
    expect(pod.hostUsers).toBeUndefined();
    expect(pod.containers[0]!.securityContext?.procMount).toBeUndefined();
    expect(pod.containers[0]!.securityContext?.seccompProfile?.type).toBe('RuntimeDefault');
    // Every other pod keeps the shared ServiceAccount, without a token.
    for (const d of byKind<Workload>(objects, 'Deployment')) {
      expect(d.spec.template.spec.automountServiceAccountToken, d.metadata.name).toBe(false);
      expect(d.spec.template.spec.serviceAccountName, d.metadata.name).not.toBe('threadwork-runner');
    }
    const accounts = byKind<K8sObject & { automountServiceAccountToken?: boolean }>(objects, 'ServiceAccount');
    expect(accounts.find((a) => a.metadata.name === 'threadwork-runner')?.automountServiceAccountToken).toBe(false);
  });

  it('binds the runner to a Role in the sandbox namespace alone, with only what the provider uses', () => {
    const objects = render(KUBERNETES());
    expect(byKind(objects, 'ClusterRole')).toEqual([]);
    expect(byKind(objects, 'ClusterRoleBinding')).toEqual([]);
    const roles = byKind<K8sObject & { rules: Rule[] }>(objects, 'Role');
    expect(roles).toHaveLength(1);
    const role = roles[0]!;
    expect(role.metadata.namespace).toBe('threadwork-sandboxes');
    const granted = role.rules.flatMap((r) =>
      r.resources.flatMap((res) => r.verbs.map((v) => `${r.apiGroups.join(',')}/${res}:${v}`)),
    );
    expect(granted.sort()).toEqual(
      [
        ...['get', 'list', 'watch', 'create', 'delete'].flatMap((v) => [`/pods:${v}`, `/persistentvolumeclaims:${v}`]),
        '/pods/exec:get',
        '/pods/exec:create',
        '/pods/attach:get',
        '/pods/attach:create',
      ].sort(),
    );
    for (const rule of role.rules) {
      expect(rule.resources).not.toContain('secrets');
      expect(rule.resources).not.toContain('*');
      expect(rule.verbs).not.toContain('*');
      expect(rule.apiGroups).toEqual(['']);
    }
    const bindings = byKind<K8sObject & { roleRef: { kind: string; name: string }; subjects: Subject[] }>(
      objects,
      'RoleBinding',
    );
    expect(bindings).toHaveLength(1);
    expect(bindings[0]!.metadata.namespace).toBe('threadwork-sandboxes');
    expect(bindings[0]!.roleRef).toMatchObject({ kind: 'Role', name: role.metadata.name });
    expect(bindings[0]!.subjects).toEqual([
      { kind: 'ServiceAccount', name: 'threadwork-runner', namespace: 'threadwork' },
    ]);
  });

  it('denies every sandbox pod all ingress and egress, and enforces the restricted Pod Security Standard', () => {
    const objects = render(KUBERNETES());
    const sandboxPolicies = byKind<Policy>(inNamespace(objects, 'threadwork-sandboxes'), 'NetworkPolicy');
    expect(sandboxPolicies).toHaveLength(1);
    const deny = sandboxPolicies[0]!;
    expect(deny.spec.podSelector).toEqual({});
    expect(deny.spec.policyTypes.sort()).toEqual(['Egress', 'Ingress']);
    expect(deny.spec.egress).toBeUndefined();
    expect(deny.spec.ingress).toBeUndefined();
    const ns = byKind(objects, 'Namespace');
    expect(ns).toHaveLength(1);
    expect(ns[0]!.metadata.name).toBe('threadwork-sandboxes');
    expect(ns[0]!.metadata.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');

    const own = render([
      ...KUBERNETES(),
      '--set',
      'runner.sandbox.kubernetes.createNamespace=false',
      '--set',
      'runner.sandbox.kubernetes.namespace=agents',
    ]);
    expect(byKind(own, 'Namespace')).toEqual([]);
    expect(
      inNamespace(own, 'agents')
        .map((o) => o.kind)
        .sort(),
    ).toEqual(['NetworkPolicy', 'Role', 'RoleBinding']);
  });

  it.each(['default', 'kube-system', 'kube-public', 'kube-node-lease'])(
    'refuses the shared namespace %s for the sandboxes',
    (namespace) => {
      const result = template([...KUBERNETES(), '--set', `runner.sandbox.kubernetes.namespace=${namespace}`]);
      expect(result.status).not.toBe(0);
      expect(result.stderr).toContain(`"${namespace}" is shared with other workloads`);
    },
  );

  it('lets the runner reach the API server at the addresses given, and refuses none given', () => {
    const objects = render(KUBERNETES());
    const egress = egressOf(objects, runnerOf(objects));
    expect(egress).toContainEqual(API_SERVER);
    const unnamed = template([
      ...KUBERNETES(),
      '-f',
      valuesFile('k8s-no-api', { runner: { sandbox: { kubernetes: { apiServerEgress: { to: [] } } } } }),
    ]);
    expect(unnamed.status).not.toBe(0);
    expect(unnamed.stderr).toMatch(/apiServerEgress\.to/);
  });

  it('refuses a kubernetes provider without an image, in the release namespace, or with bad values', () => {
    const noImage = template([...KUBERNETES(), '--set', 'runner.sandbox.kubernetes.image=']);
    expect(noImage.status).not.toBe(0);
    expect(noImage.stderr).toMatch(/runner\.sandbox\.kubernetes\.image: required/);
    const sameNs = template([...KUBERNETES(), '--set', 'runner.sandbox.kubernetes.namespace=threadwork']);
    expect(sameNs.status).not.toBe(0);
    expect(sameNs.stderr).toMatch(/must not be the release's own namespace/);
    for (const [key, value] of [
      ['runner.sandbox.provider', 'docker'],
      ['runner.sandbox.kubernetes.namespace', 'Not_A_Label'],
      ['runner.sandbox.kubernetes.volume.size', '10 gigs'],
      ['runner.sandbox.kubernetes.idleTimeoutMs', '-1'],
    ] as const) {
      const bad = template([...KUBERNETES(), '--set', `${key}=${value}`]);
      expect(bad.status, `${key}=${value}`).not.toBe(0);
      expect(bad.stderr, `${key}=${value}`).toMatch(/values don't meet the specifications of the schema/);
    }
  });
});
