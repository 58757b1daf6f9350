import { loadConfig } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { RunnerConfig } from './config.js';

describe('runner configuration', () => {
  it('reads the egress policy and refuses an allowlist it cannot use', () => {
    expect(loadConfig(RunnerConfig, {})).toMatchObject({ SANDBOX_EGRESS: 'none', SANDBOX_EGRESS_ALLOW: [] });
    expect(
      loadConfig(RunnerConfig, {
        SANDBOX_EGRESS: 'allowlist',
        SANDBOX_EGRESS_ALLOW: ' registry.npmjs.org, *.pythonhosted.org ,git.example.com:8443',
      }).SANDBOX_EGRESS_ALLOW,
    ).toEqual(['registry.npmjs.org', '*.pythonhosted.org', 'git.example.com:8443']);
    expect(() => loadConfig(RunnerConfig, { SANDBOX_EGRESS: 'allowlist' })).toThrow(/SANDBOX_EGRESS_ALLOW/);
    for (const bad of ['https://registry.npmjs.org', 'evil.com/path', '*', 'a.*.com', 'host:0', 'host:99999']) {
      expect(() => loadConfig(RunnerConfig, { SANDBOX_EGRESS_ALLOW: bad }), bad).toThrow(/SANDBOX_EGRESS_ALLOW/);
    }
    expect(() => loadConfig(RunnerConfig, { SANDBOX_EGRESS: 'everything' })).toThrow(/SANDBOX_EGRESS/);
  });

  it('keeps the local sandbox provider by default, and reads and checks the kubernetes settings', () => {
    const local = loadConfig(RunnerConfig, {});
    expect(local.SANDBOX_PROVIDER).toBe('local');
    expect(local).toMatchObject({
      SANDBOX_K8S_NAMESPACE: 'threadwork-sandboxes',
      SANDBOX_K8S_RUNTIME_CLASS: null,
      SANDBOX_K8S_NODE_SELECTOR: {},
      SANDBOX_K8S_TOLERATIONS: [],
      SANDBOX_K8S_STORAGE_CLASS: null,
      SANDBOX_K8S_VOLUME_SIZE: '10Gi',
    });
    expect(() => loadConfig(RunnerConfig, { SANDBOX_PROVIDER: 'kubernetes' })).toThrow(/SANDBOX_K8S_IMAGE/);
    const k8s = loadConfig(RunnerConfig, {
      SANDBOX_PROVIDER: 'kubernetes',
      SANDBOX_K8S_IMAGE: 'sandbox:1',
      SANDBOX_K8S_NAMESPACE: 'agents',
      SANDBOX_K8S_RESOURCES: '{"limits":{"cpu":"1","memory":"2Gi"}}',
      SANDBOX_K8S_RUNTIME_CLASS: 'gvisor',
      SANDBOX_K8S_NODE_SELECTOR: '{"pool":"sandboxes"}',
      SANDBOX_K8S_TOLERATIONS: '[{"key":"sandboxes","operator":"Exists","effect":"NoSchedule"}]',
      SANDBOX_K8S_VOLUME_SIZE: '20Gi',
      SANDBOX_K8S_STORAGE_CLASS: 'fast',
      SANDBOX_K8S_IDLE_MS: '60000',
    });
    expect(k8s).toMatchObject({
      SANDBOX_PROVIDER: 'kubernetes',
      SANDBOX_K8S_NAMESPACE: 'agents',
      SANDBOX_K8S_RESOURCES: { limits: { cpu: '1', memory: '2Gi' } },
      SANDBOX_K8S_RUNTIME_CLASS: 'gvisor',
      SANDBOX_K8S_NODE_SELECTOR: { pool: 'sandboxes' },
      SANDBOX_K8S_TOLERATIONS: [{ key: 'sandboxes', operator: 'Exists', effect: 'NoSchedule' }],
      SANDBOX_K8S_VOLUME_SIZE: '20Gi',
      SANDBOX_K8S_STORAGE_CLASS: 'fast',
      SANDBOX_K8S_IDLE_MS: 60_000,
    });
    const bad: Record<string, string>[] = [
      { SANDBOX_PROVIDER: 'docker' },
      { SANDBOX_K8S_NAMESPACE: 'Not_A_Label' },
      { SANDBOX_K8S_RESOURCES: 'not json' },
      { SANDBOX_K8S_RESOURCES: '{"limits":{"cpu":"lots"}}' },
      { SANDBOX_K8S_RESOURCES: '{"limits":{"nvidia.com/gpu":"1"}}' },
      { SANDBOX_K8S_NODE_SELECTOR: '["a"]' },
      { SANDBOX_K8S_TOLERATIONS: '[{"operator":"Sometimes"}]' },
      { SANDBOX_K8S_VOLUME_SIZE: '10 gigs' },
      { SANDBOX_K8S_RUNTIME_CLASS: 'G Visor' },
    ];
    for (const env of bad) {
      const name = Object.keys(env)[0]!;
      expect(() => loadConfig(RunnerConfig, env), JSON.stringify(env)).toThrow(new RegExp(name));
    }
  });
});
