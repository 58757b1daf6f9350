// The Helm chart's runner: what its pod gets for the jail, and where its network policy lets it go.
import { describe, expect, it } from 'vitest';
import {
  byKind,
  component,
  egressOf,
  expectValid,
  render,
  REQUIRED,
  template,
  useHelm,
  valuesFile,
  workloads,
} from './support/chart.js';
import type { K8sObject, PodTemplate, Policy, Workload } from './support/chart.js';

useHelm();

describe('charts/threadwork', () => {
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
});
