import { describe, expect, it } from 'vitest';
import {
  InstallSession,
  InstallSessionRequest,
  LinkInstallationRequest,
  ProviderConnection,
  RepositoriesQuery,
  RepositoryList,
  SetupQuery,
} from './repohost.js';

const repository = {
  repository_id: 42,
  installation_id: 7,
  owner: 'acme',
  name: 'app',
  full_name: 'acme/app',
  url: 'https://github.com/acme/app',
  avatar_url: 'https://avatars.githubusercontent.com/u/1',
  private: true,
  default_branch: 'main',
};

describe('RepositoryList', () => {
  it('accepts the contract shape', () => {
    expect(RepositoryList.parse({ repositories: [repository] })).toEqual({ repositories: [repository] });
  });

  it('rejects a missing field and a url that is not a URI', () => {
    const { default_branch: _branch, ...withoutBranch } = repository;
    expect(RepositoryList.safeParse({ repositories: [withoutBranch] }).success).toBe(false);
    expect(RepositoryList.safeParse({ repositories: [{ ...repository, url: 'not a url' }] }).success).toBe(false);
  });
});

describe('RepositoriesQuery', () => {
  it('accepts an absent q and up to 256 characters', () => {
    expect(RepositoriesQuery.parse({})).toEqual({});
    expect(RepositoriesQuery.safeParse({ q: 'q'.repeat(256) }).success).toBe(true);
  });

  it('rejects q of 257 characters', () => {
    expect(RepositoriesQuery.safeParse({ q: 'q'.repeat(257) }).success).toBe(false);
  });
});

describe('ProviderConnection', () => {
  it('accepts a ready connection with string and numeric provider ids', () => {
    const connection = {
      status: 'ready',
      app_slug: 'threadwork',
      install_url: 'https://github.com/apps/threadwork/installations/new',
      user: { id: 1, login: 'octocat', avatar_url: 'https://avatars.githubusercontent.com/u/1' },
      installations: [
        {
          id: 7,
          account: 'acme',
          avatar_url: 'https://avatars.githubusercontent.com/u/2',
          target_type: 'Organization',
          repository_selection: 'selected',
          suspended: false,
          manage_url: 'https://github.com/organizations/acme/settings/installations/7',
        },
      ],
      installation_requests: [
        { id: 'req-1', account: 'other', avatar_url: 'x', target_type: 'User', requested_at: '2025-05-01T10:00:00Z' },
      ],
      installation_requests_status: 'ready',
    };
    expect(ProviderConnection.parse(connection)).toEqual(connection);
  });

  it('requires only the two arrays', () => {
    expect(ProviderConnection.parse({ installations: [], installation_requests: [] })).toEqual({
      installations: [],
      installation_requests: [],
    });
    expect(ProviderConnection.safeParse({ installations: [] }).success).toBe(false);
    expect(
      ProviderConnection.safeParse({ status: 'broken', installations: [], installation_requests: [] }).success,
    ).toBe(false);
  });
});

describe('install session', () => {
  const challenge = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

  it('accepts the request and response shapes', () => {
    expect(
      InstallSessionRequest.parse({ return_to: 'threadwork://repohost/setup', code_challenge: challenge }),
    ).toEqual({ return_to: 'threadwork://repohost/setup', code_challenge: challenge });
    expect(
      InstallSessionRequest.safeParse({
        return_to: 'threadwork://repohost/setup',
        code_challenge: challenge,
        code_challenge_method: 'S256',
      }).success,
    ).toBe(true);
    const session = {
      install_url: 'https://github.com/apps/threadwork/installations/new?state=abc',
      expires_at: '2025-05-01T10:10:00Z',
    };
    expect(InstallSession.parse(session)).toEqual(session);
  });

  it('rejects a missing or empty return_to', () => {
    expect(InstallSessionRequest.safeParse({ code_challenge: challenge }).success).toBe(false);
    expect(InstallSessionRequest.safeParse({ return_to: '', code_challenge: challenge }).success).toBe(false);
    expect(InstallSession.safeParse({ install_url: 'https://x.test' }).success).toBe(false);
  });

  it('requires an S256 code challenge, saying what it is when it is missing', () => {
    const missing = InstallSessionRequest.safeParse({ return_to: 'threadwork://repohost/setup' });
    expect(missing.success).toBe(false);
    expect(missing.error?.issues[0]?.message).toMatch(/^required: base64url\(SHA-256\(code_verifier\)\)/);
    for (const code_challenge of ['short', `${challenge}=`, challenge.replace('-', '+')]) {
      expect(InstallSessionRequest.safeParse({ return_to: 'x://y', code_challenge }).success).toBe(false);
    }
    const plain = { return_to: 'x://y', code_challenge: challenge, code_challenge_method: 'plain' };
    expect(InstallSessionRequest.safeParse(plain).success).toBe(false);
  });
});

describe('LinkInstallationRequest', () => {
  it('takes a code and a verifier of 43 to 128 unreserved characters, nothing else', () => {
    const verifier = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
    expect(LinkInstallationRequest.parse({ code: 'c0de', code_verifier: verifier })).toEqual({
      code: 'c0de',
      code_verifier: verifier,
    });
    for (const code_verifier of ['x'.repeat(42), 'x'.repeat(129), `${verifier.slice(1)}/`]) {
      expect(LinkInstallationRequest.safeParse({ code: 'c0de', code_verifier }).success).toBe(false);
    }
    expect(LinkInstallationRequest.safeParse({ code: 'c0de', code_verifier: verifier, owner_id: 'x' }).success).toBe(
      false,
    );
  });
});

describe('SetupQuery', () => {
  it('coerces installation_id and keeps state', () => {
    expect(SetupQuery.parse({ installation_id: '123', setup_action: 'install', state: 's1' })).toEqual({
      installation_id: 123,
      setup_action: 'install',
      state: 's1',
    });
  });

  it('allows the request redirect without installation_id', () => {
    expect(SetupQuery.parse({ setup_action: 'request', state: 's1' })).toEqual({
      setup_action: 'request',
      state: 's1',
    });
  });

  it('rejects a missing state and non-positive or non-numeric installation ids', () => {
    expect(SetupQuery.safeParse({ installation_id: '123' }).success).toBe(false);
    expect(SetupQuery.safeParse({ installation_id: '0', state: 's' }).success).toBe(false);
    expect(SetupQuery.safeParse({ installation_id: 'abc', state: 's' }).success).toBe(false);
    expect(SetupQuery.safeParse({ state: 's'.repeat(257) }).success).toBe(false);
  });
});
