import { join, resolve } from 'node:path';
import { loadConfig } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { githubAppConfig, localRepositoriesDir, RepohostConfig } from './config.js';

describe('localRepositoriesDir', () => {
  it('is REPOHOST_LOCAL_DIR, else <THREADWORK_DATA_DIR>/repos, else ./.data/repos, always absolute', () => {
    expect(localRepositoriesDir(loadConfig(RepohostConfig, { REPOHOST_LOCAL_DIR: '/srv/repos' }))).toBe('/srv/repos');
    expect(localRepositoriesDir(loadConfig(RepohostConfig, { THREADWORK_DATA_DIR: '/var/tw' }))).toBe('/var/tw/repos');
    expect(localRepositoriesDir(loadConfig(RepohostConfig, {}))).toBe(resolve(join('.data', 'repos')));
  });
});

describe('GitHub App settings', () => {
  const app = {
    GITHUB_APP_ID: '12',
    GITHUB_APP_PRIVATE_KEY: '-----BEGIN RSA PRIVATE KEY-----\\nabc\\n-----END RSA PRIVATE KEY-----',
    GITHUB_WEBHOOK_SECRET: 's',
    GITHUB_APP_SLUG: 'my-app',
  };

  it('take PUBLIC_BASE_URL as an origin only', () => {
    expect(
      githubAppConfig(loadConfig(RepohostConfig, { ...app, PUBLIC_BASE_URL: 'https://tw.example/' })),
    ).toMatchObject({
      publicBaseUrl: 'https://tw.example',
    });
    expect(githubAppConfig(loadConfig(RepohostConfig, app))).toMatchObject({ publicBaseUrl: null });
    for (const bad of ['https://tw.example/console', 'https://tw.example/?x=1', 'ftp://tw.example']) {
      expect(() => loadConfig(RepohostConfig, { ...app, PUBLIC_BASE_URL: bad })).toThrow(/PUBLIC_BASE_URL/);
    }
  });

  it('are off without an app id and key, with the local provider alone', () => {
    expect(githubAppConfig(loadConfig(RepohostConfig, {}))).toBeNull();
    expect(githubAppConfig(loadConfig(RepohostConfig, { GITHUB_APP_ID: '', GITHUB_APP_PRIVATE_KEY: '' }))).toBeNull();
  });

  it('need the secret and slug with the app, and both halves of the OAuth client', () => {
    expect(() => loadConfig(RepohostConfig, { GITHUB_APP_ID: '12' })).toThrow(/GITHUB_APP_PRIVATE_KEY/);
    expect(() => loadConfig(RepohostConfig, { ...app, GITHUB_APP_SLUG: undefined })).toThrow(/GITHUB_APP_SLUG/);
    expect(() => loadConfig(RepohostConfig, { ...app, GITHUB_CLIENT_ID: 'x' })).toThrow(/GITHUB_CLIENT_SECRET/);
  });

  it('need the OAuth client in production, where nothing else proves who installed', () => {
    expect(() => loadConfig(RepohostConfig, { ...app, NODE_ENV: 'production' })).toThrow(
      /GITHUB_CLIENT_ID: required with a GitHub App when NODE_ENV=production/,
    );
    const oauth = { GITHUB_CLIENT_ID: 'Iv1.x', GITHUB_CLIENT_SECRET: 'y' };
    expect(githubAppConfig(loadConfig(RepohostConfig, { ...app, ...oauth, NODE_ENV: 'production' }))).toMatchObject({
      oauth: { clientId: 'Iv1.x', clientSecret: 'y' },
    });
    // Without an app, production needs nothing of GitHub.
    expect(githubAppConfig(loadConfig(RepohostConfig, { NODE_ENV: 'production' }))).toBeNull();
  });

  it('read a one-line PEM and default to github.com', () => {
    const config = githubAppConfig(loadConfig(RepohostConfig, app));
    expect(config).toMatchObject({
      appId: 12,
      privateKey: '-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----',
      apiUrl: 'https://api.github.com',
      webUrl: 'https://github.com',
      appScheme: 'threadwork',
      installSessionTtlMs: 600_000,
      linkCodeTtlMs: 300_000,
      prDraft: true,
      oauth: null,
    });
    expect(
      githubAppConfig(loadConfig(RepohostConfig, { ...app, PR_DRAFT: 'false', GITHUB_API_URL: 'https://ghe/api/v3/' })),
    ).toMatchObject({
      prDraft: false,
      apiUrl: 'https://ghe/api/v3',
    });
  });
});
