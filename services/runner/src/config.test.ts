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
});
