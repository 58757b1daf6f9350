import { loadConfig } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { RunnerConfig } from './config.js';

describe('runner configuration', () => {
  it('sets no delivery limit on jobs by default: RUN_MAX_ATTEMPTS (runs) is what ends a poison job', () => {
    expect(loadConfig(RunnerConfig, {}).JOB_MAX_DELIVER).toBe(-1);
    expect(loadConfig(RunnerConfig, { JOB_MAX_DELIVER: '20' }).JOB_MAX_DELIVER).toBe(20);
    for (const bad of ['0', '1', '-2', 'many']) {
      expect(() => loadConfig(RunnerConfig, { JOB_MAX_DELIVER: bad })).toThrow(/JOB_MAX_DELIVER/);
    }
  });
});
