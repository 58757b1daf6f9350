import { join, resolve } from 'node:path';
import { loadConfig } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { localRepositoriesDir, RepohostConfig } from './config.js';

describe('localRepositoriesDir', () => {
  it('is REPOHOST_LOCAL_DIR, else <THREADWORK_DATA_DIR>/repos, else ./.data/repos, always absolute', () => {
    expect(localRepositoriesDir(loadConfig(RepohostConfig, { REPOHOST_LOCAL_DIR: '/srv/repos' }))).toBe('/srv/repos');
    expect(localRepositoriesDir(loadConfig(RepohostConfig, { THREADWORK_DATA_DIR: '/var/tw' }))).toBe('/var/tw/repos');
    expect(localRepositoriesDir(loadConfig(RepohostConfig, {}))).toBe(resolve(join('.data', 'repos')));
  });
});
