import { Repository } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import {
  initialAvatar,
  localConnection,
  localRepository,
  localRepositoryId,
  parseHeadRef,
  repositoryNameOf,
} from './local.js';
import { ProviderConnection } from '@threadwork/contracts';

describe('localRepositoryId', () => {
  it('is 32-bit FNV-1a cut to 31 bits', () => {
    // Published FNV-1a 32-bit test vectors: "a" → 0xe40c292c, "foobar" → 0xbf9cf968.
    expect(localRepositoryId('a')).toBe(0xe40c292c & 0x7fffffff);
    expect(localRepositoryId('foobar')).toBe(0xbf9cf968 & 0x7fffffff);
  });

  it('is stable, positive and fits a signed 32-bit integer', () => {
    for (const name of ['x', 'threadwork', 'ünïcödé', 'a'.repeat(300)]) {
      const id = localRepositoryId(name);
      expect(id).toBe(localRepositoryId(name));
      expect(id).toBeGreaterThan(0);
      expect(id).toBeLessThanOrEqual(0x7fffffff);
    }
  });

  it('can collide, which is why ids are recorded behind a unique index', () => {
    expect(localRepositoryId('repo-772989')).toBe(localRepositoryId('repo-1003602'));
  });
});

describe('repositoryNameOf', () => {
  it.each([
    ['app.git', 'app'],
    ['my.repo.git', 'my.repo'],
    ['.git', null],
    ['.hidden.git', null],
    ['app', null],
    ['app.git.bak', null],
  ])('%s → %s', (entry, name) => {
    expect(repositoryNameOf(entry)).toBe(name);
  });
});

describe('parseHeadRef', () => {
  it('reads the branch of a symbolic HEAD', () => {
    expect(parseHeadRef('ref: refs/heads/main\n')).toBe('main');
    expect(parseHeadRef('ref: refs/heads/release/2.x\n')).toBe('release/2.x');
  });

  it('gives null for a detached HEAD or garbage', () => {
    expect(parseHeadRef('3f786850e387550fdab836ed7e6dc881de23001b\n')).toBeNull();
    expect(parseHeadRef('ref: refs/tags/v1\n')).toBeNull();
    expect(parseHeadRef('')).toBeNull();
  });

  it('gives null for a name no branch may have, such as one a command line would take for an option', () => {
    expect(parseHeadRef('ref: refs/heads/--upload-pack=touch /tmp/pwned\n')).toBeNull();
    expect(parseHeadRef('ref: refs/heads/-x\n')).toBeNull();
    expect(parseHeadRef('ref: refs/heads/a..b\n')).toBeNull();
  });
});

describe('local shapes', () => {
  it('builds a contract Repository', () => {
    const repository = localRepository({
      repositoryId: 7,
      name: 'app',
      cloneUrl: 'file:///srv/repos/app.git',
      defaultBranch: 'trunk',
    });
    expect(repository.clone_url).toBe('file:///srv/repos/app.git');
    expect(Repository.parse(repository)).toEqual({
      repository_id: 7,
      installation_id: 1,
      owner: 'local',
      name: 'app',
      full_name: 'local/app',
      url: 'local://local/app.git',
      avatar_url: initialAvatar('app'),
      private: true,
      default_branch: 'trunk',
    });
  });

  it('draws the initial into a data URI', () => {
    const avatar = initialAvatar('zeta');
    expect(avatar.startsWith('data:image/svg+xml,')).toBe(true);
    expect(decodeURIComponent(avatar)).toContain('>Z</text>');
  });

  it('describes the folder as one ready installation', () => {
    const connection = ProviderConnection.parse(localConnection());
    expect(connection).toMatchObject({
      status: 'ready',
      message:
        "Local repositories: the bare repositories in the server's REPOHOST_LOCAL_DIR (no GitHub App configured)",
      installations: [{ id: 1, account: 'local', target_type: 'User', repository_selection: 'all', suspended: false }],
      installation_requests: [],
    });
  });
});
