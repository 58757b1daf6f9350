import type { AppError } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import {
  administersAccount,
  authorizeUrl,
  signInCallbackUrl,
  codeChallengeOf,
  eventMismatch,
  githubRepository,
  identityConflict,
  installUrl,
  isAllowedReturnTo,
  isStale,
  mayLink,
  parseWebhookPayload,
  setupRedirect,
  setupReturnTo,
  verifierMatches,
} from './github.js';

describe('install sessions', () => {
  it('accept exactly the app setup callback', () => {
    expect(setupReturnTo('tw')).toBe('tw://repohost/setup');
    expect(isAllowedReturnTo('tw://repohost/setup', 'tw')).toBe(true);
    for (const other of [
      'tw://repohost/setup/',
      'tw://repohost/setup?x',
      'TW://repohost/setup',
      'https://repohost/setup',
    ]) {
      expect(isAllowedReturnTo(other, 'tw')).toBe(false);
    }
  });

  it('accept the console’s setup page too, exactly, once the public URL is configured', () => {
    expect(isAllowedReturnTo('https://tw.example/settings/github', 'tw')).toBe(false);
    expect(isAllowedReturnTo('https://tw.example/settings/github', 'tw', 'https://tw.example')).toBe(true);
    expect(isAllowedReturnTo('tw://repohost/setup', 'tw', 'https://tw.example')).toBe(true);
    for (const other of [
      'https://tw.example/settings/github/',
      'https://tw.example/settings/github?x',
      'https://tw.example/settings/',
      'https://tw.example.evil/settings/github',
      'http://tw.example/settings/github',
      'https://evil.example/settings/github',
    ]) {
      expect(isAllowedReturnTo(other, 'tw', 'https://tw.example')).toBe(false);
    }
  });

  it('build the sign-in authorize URL with the client and the gateway’s callback', () => {
    const url = new URL(authorizeUrl('https://ghe.example/', 'Iv1.abc', signInCallbackUrl('https://tw.example')));
    expect(`${url.origin}${url.pathname}`).toBe('https://ghe.example/login/oauth/authorize');
    expect(Object.fromEntries(url.searchParams)).toEqual({
      client_id: 'Iv1.abc',
      redirect_uri: 'https://tw.example/v1/auth/github/callback',
    });
  });

  it('build the install URL with the state', () => {
    expect(installUrl('https://github.com', 'my-app', 'abc')).toBe(
      'https://github.com/apps/my-app/installations/new?state=abc',
    );
    expect(installUrl('https://ghe.example/', 'x')).toBe('https://ghe.example/apps/x/installations/new');
  });

  it('redirect with the outcome', () => {
    expect(setupRedirect('tw://repohost/setup', { outcome: 'installed', installationId: 5, code: 'c0de' })).toBe(
      'tw://repohost/setup?outcome=installed&installation_id=5&code=c0de',
    );
    expect(setupRedirect('tw://repohost/setup', { outcome: 'requested' })).toBe(
      'tw://repohost/setup?outcome=requested',
    );
    expect(setupRedirect('tw://repohost/setup', { outcome: 'error', error: 'invalid_state' })).toBe(
      'tw://repohost/setup?outcome=error&error=invalid_state',
    );
  });
});

describe('link codes', () => {
  it('take the PKCE S256 challenge: RFC 7636 appendix B', () => {
    const verifier = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
    expect(codeChallengeOf(verifier)).toBe('E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM');
    expect(verifierMatches(verifier, 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')).toBe(true);
    expect(verifierMatches(`${verifier}x`, 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM')).toBe(false);
    expect(verifierMatches(verifier, 'short')).toBe(false);
  });

  it('go to the GitHub user an owner is verified as, and that user to one owner', () => {
    const base = { ownerId: 'usr_a', githubUserId: 1, ownerGitHubId: null, githubUserOwner: null };
    expect(identityConflict(base)).toBeNull();
    expect(identityConflict({ ...base, ownerGitHubId: 1, githubUserOwner: 'usr_a' })).toBeNull();
    expect(identityConflict({ ...base, ownerGitHubId: 2 })).toBe('owner_is_another_github_user');
    expect(identityConflict({ ...base, githubUserOwner: 'usr_b' })).toBe('github_user_is_another_owner');
  });
});

describe('administersAccount', () => {
  const active = (role: string) => ({ state: 'active', role });
  it('gives a user’s own account to that user alone', () => {
    const account = { id: 7, type: 'User' };
    expect(administersAccount({ account, githubUserId: 7, membership: null })).toBe(true);
    expect(administersAccount({ account, githubUserId: 8, membership: null })).toBe(false);
    // A membership says nothing about someone else's personal account.
    expect(administersAccount({ account, githubUserId: 8, membership: active('admin') })).toBe(false);
  });

  it('gives an organisation to its active admins only', () => {
    const account = { id: 9, type: 'Organization' };
    expect(administersAccount({ account, githubUserId: 1, membership: active('admin') })).toBe(true);
    expect(administersAccount({ account, githubUserId: 1, membership: active('member') })).toBe(false);
    expect(administersAccount({ account, githubUserId: 1, membership: active('billing_manager') })).toBe(false);
    expect(administersAccount({ account, githubUserId: 1, membership: { state: 'pending', role: 'admin' } })).toBe(
      false,
    );
    expect(administersAccount({ account, githubUserId: 1, membership: null })).toBe(false);
    // An organisation's id is no user's to claim.
    expect(administersAccount({ account, githubUserId: 9, membership: null })).toBe(false);
  });

  it('gives nothing else: enterprises, installations without an account', () => {
    expect(
      administersAccount({ account: { id: 3, type: 'Enterprise' }, githubUserId: 3, membership: active('admin') }),
    ).toBe(false);
    expect(administersAccount({ account: null, githubUserId: 3, membership: active('admin') })).toBe(false);
  });
});

describe('mayLink', () => {
  const session = new Date('2025-01-01T12:00:00Z');
  it('with OAuth, follows whether the user administers the account, however old the installation', () => {
    const old = new Date('2020-01-01T00:00:00Z');
    const base = { installationCreatedAt: old, sessionCreatedAt: session };
    expect(mayLink({ ...base, userAdministers: true })).toBe(true);
    expect(mayLink({ ...base, installationCreatedAt: session, userAdministers: false })).toBe(false);
  });

  it('without OAuth, links only installations made during the session (a minute of skew)', () => {
    const at = (iso: string) => new Date(iso);
    const base = { sessionCreatedAt: session, userAdministers: null };
    expect(mayLink({ ...base, installationCreatedAt: at('2025-01-01T12:05:00Z') })).toBe(true);
    expect(mayLink({ ...base, installationCreatedAt: at('2025-01-01T11:59:30Z') })).toBe(true);
    expect(mayLink({ ...base, installationCreatedAt: at('2025-01-01T11:50:00Z') })).toBe(false);
  });
});

describe('parseWebhookPayload', () => {
  it('reads JSON and form-encoded deliveries', () => {
    expect(parseWebhookPayload('application/json', Buffer.from('{"a":1}'))).toEqual({ a: 1 });
    const form = Buffer.from(`payload=${encodeURIComponent('{"b":2}')}`);
    expect(parseWebhookPayload('application/x-www-form-urlencoded', form)).toEqual({ b: 2 });
  });

  it('is invalid_request for anything else', () => {
    for (const [type, raw] of [
      ['application/json', 'nope'],
      ['application/json', '[1]'],
      ['application/x-www-form-urlencoded', 'other=1'],
    ] as const) {
      const err = (() => {
        try {
          parseWebhookPayload(type, Buffer.from(raw));
        } catch (e) {
          return e;
        }
      })();
      expect((err as AppError).code).toBe('invalid_request');
    }
  });
});

describe('shapes', () => {
  it('lists a GitHub repository by its clone URL', () => {
    expect(
      githubRepository(
        {
          id: 9,
          name: 'w',
          full_name: 'o/w',
          owner: { login: 'o', id: 1, avatar_url: 'https://a/o.png' },
          private: false,
          clone_url: 'https://github.com/o/w.git',
          default_branch: 'main',
        },
        77,
      ),
    ).toEqual({
      repository_id: 9,
      installation_id: 77,
      owner: 'o',
      name: 'w',
      full_name: 'o/w',
      url: 'https://github.com/o/w.git',
      avatar_url: 'https://a/o.png',
      private: false,
      default_branch: 'main',
      clone_url: 'https://github.com/o/w.git',
    });
  });

  it('tells stale from fresh', () => {
    const now = new Date(10_000);
    expect(isStale(null, now, 1000)).toBe(true);
    expect(isStale(undefined, now, 1000)).toBe(true);
    expect(isStale(new Date(9_500), now, 1000)).toBe(false);
    expect(isStale(new Date(9_000), now, 1000)).toBe(true);
  });
});

describe('eventMismatch', () => {
  const payloads: Record<string, Record<string, unknown>> = {
    installation: { action: 'created', installation: {}, repositories: [], sender: {} },
    installation_repositories: {
      action: 'added',
      installation: {},
      repositories_added: [],
      repositories_removed: [],
      sender: {},
    },
    repository: { action: 'edited', repository: {}, installation: {}, sender: {} },
    pull_request: { action: 'opened', number: 1, pull_request: {}, repository: {}, installation: {}, sender: {} },
    check_run: { action: 'created', check_run: {}, repository: {}, installation: {}, sender: {} },
    check_suite: { action: 'completed', check_suite: {}, repository: {}, installation: {}, sender: {} },
    status: { sha: 'a', context: 'ci', state: 'success', repository: {}, installation: {}, sender: {} },
  };

  it('accepts each payload under its own event, and any under an event repohost ignores', () => {
    for (const [event, payload] of Object.entries(payloads)) {
      expect(eventMismatch(event, payload)).toBeNull();
      expect(eventMismatch('push', payload)).toBeNull();
    }
  });

  it('refuses each payload under every other event repohost acts on', () => {
    for (const [event, payload] of Object.entries(payloads)) {
      for (const other of Object.keys(payloads).filter((name) => name !== event)) {
        expect(eventMismatch(other, payload), `${event} as ${other}`).not.toBeNull();
      }
    }
    expect(eventMismatch('repository', payloads.pull_request!)).toBe(
      'a payload with pull_request is a pull_request event, not repository',
    );
    expect(eventMismatch('installation', payloads.status!)).toBe('installation payloads carry no repository');
  });
});
