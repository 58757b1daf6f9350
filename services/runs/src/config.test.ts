import { ConfigError, loadConfig } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { RunsConfig } from './config.js';

describe('runs config', () => {
  it('sets no delivery limit on jobs by default: RUN_MAX_ATTEMPTS is what ends a poison job', () => {
    expect(loadConfig(RunsConfig, {}).JOB_MAX_DELIVER).toBe(-1);
    expect(loadConfig(RunsConfig, { JOB_MAX_DELIVER: '20' }).JOB_MAX_DELIVER).toBe(20);
    for (const bad of ['0', '1', '-2', 'many']) {
      expect(() => loadConfig(RunsConfig, { JOB_MAX_DELIVER: bad })).toThrow(/JOB_MAX_DELIVER/);
    }
  });

  it('has server defaults for what an admission leaves out', () => {
    expect(loadConfig(RunsConfig, {})).toMatchObject({
      DEFAULT_HARNESS: 'codex',
      DEFAULT_MODEL: 'gpt-5-codex',
      DEFAULT_REASONING_EFFORT: 'medium',
      RUN_MAX_ATTEMPTS: 3,
      ORPHAN_SLOT_AFTER_MS: 60_000,
    });
  });

  it('stops on a harness that cannot name a RUN_JOBS subject or a nonsensical attempt count', () => {
    expect(() => loadConfig(RunsConfig, { DEFAULT_HARNESS: 'claude.code' })).toThrow(ConfigError);
    expect(() => loadConfig(RunsConfig, { RUN_MAX_ATTEMPTS: '0' })).toThrow(/RUN_MAX_ATTEMPTS/);
  });

  it('stops on a harness default its own lists would refuse', () => {
    expect(() => loadConfig(RunsConfig, { CODEX_MODELS: 'o3,o4' })).toThrow(/CODEX_MODEL: the default model of codex/);
    expect(() => loadConfig(RunsConfig, { CLAUDE_REASONING_EFFORT: 'minimal' })).toThrow(/CLAUDE_REASONING_EFFORT/);
    expect(() => loadConfig(RunsConfig, { HARNESSES: 'claude-code' })).toThrow(
      /DEFAULT_HARNESS: must be one of HARNESSES/,
    );
  });
});
