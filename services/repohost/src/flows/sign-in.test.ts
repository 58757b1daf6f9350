import { describe, expect, it } from 'vitest';
import type { GitHubAppConfig } from '../config.js';
import { oauthClient } from './sign-in.js';

const config = (over: Partial<GitHubAppConfig>): { config: GitHubAppConfig } => ({
  config: {
    appId: 1,
    privateKey: '',
    webhookSecret: 's',
    slug: 'app',
    oauth: { clientId: 'Iv1.abc', clientSecret: 'never-in-a-url' },
    apiUrl: 'https://api.github.com',
    webUrl: 'https://github.com',
    appScheme: 'tw',
    publicBaseUrl: 'https://tw.example',
    installSessionTtlMs: 1,
    linkCodeTtlMs: 1,
    prDraft: true,
    cacheTtlMs: 1,
    publicationSyncMs: 1,
    ...over,
  },
});

describe('sign-in with GitHub, where to authorize', () => {
  it('is GitHub’s authorize page for the OAuth client, back to the gateway, without the secret', () => {
    const answer = oauthClient(config({}));
    expect(answer).toEqual({
      authorize_url:
        'https://github.com/login/oauth/authorize?client_id=Iv1.abc&redirect_uri=https%3A%2F%2Ftw.example%2Fv1%2Fauth%2Fgithub%2Fcallback',
    });
    expect(JSON.stringify(answer)).not.toContain('never-in-a-url');
  });

  it('is nowhere without an App, an OAuth client or the public URL', () => {
    expect(oauthClient(null)).toBeNull();
    expect(oauthClient(config({ oauth: null }))).toBeNull();
    expect(oauthClient(config({ publicBaseUrl: null }))).toBeNull();
  });
});
