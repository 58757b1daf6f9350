import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProviderConnection, Repository, rpc } from '@threadwork/contracts';
import {
  AppError,
  connectNats,
  createLogger,
  loadConfig,
  request,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import { baseServiceEnv, isolatedNats, type IsolatedNats } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localRepositoryId, RepohostConfig, startRepohost } from '../src/index.js';

const owner_id = 'usr_test';

function git(...args: string[]): string {
  return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

describe('repohost local provider', () => {
  let nats: IsolatedNats;
  let nc: NatsConnection;
  let service: StartedService;
  let root: string;
  let dir: string;

  const list = async (q?: string) =>
    (await request(nc, rpc.repohost.repositories, { owner_id, ...(q === undefined ? {} : { q }) })).repositories;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'threadwork-repohost-'));
    // Not created up front: the service creates its folder.
    dir = join(root, 'repos');
    nats = await isolatedNats();
    await nats.provision();
    service = await startRepohost(
      loadConfig(RepohostConfig, { ...baseServiceEnv(nats.env('repohost')), REPOHOST_LOCAL_DIR: dir }),
    );
    nc = await connectNats({
      servers: nats.url,
      auth: nats.testAuth,
      name: 'repohost-test',
      logger: createLogger({ service: 'test', level: 'silent' }),
    });
    git('init', '--quiet', '--bare', join(dir, 'alpha.git'));
    git('init', '--quiet', '--bare', '--initial-branch=trunk', join(dir, 'Beta-Service.git'));
    // Things that are not bare repositories of ours.
    mkdirSync(join(dir, 'plain-folder'));
    mkdirSync(join(dir, 'empty.git'));
    writeFileSync(join(dir, 'file.git'), 'not a directory');
  });

  afterAll(async () => {
    await nc?.drain();
    await service?.stop();
    await nats?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('lists the bare repositories of the folder with contract fields', async () => {
    const repositories = await list();
    expect(repositories.map((r) => r.full_name)).toEqual(['local/Beta-Service', 'local/alpha']);
    for (const repository of repositories) expect(Repository.parse(repository)).toEqual(repository);

    const [beta, alpha] = repositories;
    expect(alpha).toMatchObject({
      repository_id: localRepositoryId('alpha'),
      installation_id: 1,
      owner: 'local',
      name: 'alpha',
      private: true,
      default_branch: git('--git-dir', join(dir, 'alpha.git'), 'symbolic-ref', '--short', 'HEAD').trim(),
    });
    expect(beta).toMatchObject({ name: 'Beta-Service', default_branch: 'trunk' });
    // Clients learn the repository's name, never where the server keeps it.
    expect(alpha!.url).toBe('local://local/alpha.git');
    expect(JSON.stringify(repositories)).not.toContain(dir);
    expect(alpha).not.toHaveProperty('clone_url');
    expect(alpha!.avatar_url).toMatch(/^data:image\/svg\+xml,/);
  });

  it("hands the runner's side a clone url git can clone, only through access", async () => {
    const { repositories } = await request(nc, rpc.repohost.access, {
      owner_id,
      repository_ids: [localRepositoryId('alpha')],
    });
    const [alpha] = repositories;
    expect(fileURLToPath(alpha!.clone_url)).toBe(join(dir, 'alpha.git'));
    expect(alpha!.url).toBe('local://local/alpha.git');
    const target = join(root, 'clone');
    git('clone', '--quiet', alpha!.clone_url, target);
    expect(git('-C', target, 'rev-parse', '--is-inside-work-tree').trim()).toBe('true');
  });

  it('filters on full_name ignoring case', async () => {
    expect((await list('BETA')).map((r) => r.name)).toEqual(['Beta-Service']);
    expect((await list('local/')).length).toBeGreaterThanOrEqual(2);
    expect(await list('no-such-thing')).toEqual([]);
  });

  it('resolves access in the order asked, and not_found when any is missing', async () => {
    const alphaId = localRepositoryId('alpha');
    const betaId = localRepositoryId('Beta-Service');
    const { repositories } = await request(nc, rpc.repohost.access, { owner_id, repository_ids: [betaId, alphaId] });
    expect(repositories.map((r) => r.name)).toEqual(['Beta-Service', 'alpha']);

    const err = await request(nc, rpc.repohost.access, { owner_id, repository_ids: [alphaId, 12345] }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('not_found');
  });

  it('shows a repository added while running on the next list', async () => {
    expect(await list('gamma')).toEqual([]);
    git('init', '--quiet', '--bare', '--initial-branch=develop', join(dir, 'gamma.git'));
    expect(await list('gamma')).toEqual([
      expect.objectContaining({ name: 'gamma', default_branch: 'develop', repository_id: localRepositoryId('gamma') }),
    ]);
  });

  it('describes the folder as a ready connection', async () => {
    const connection = await request(nc, rpc.repohost.connection, { owner_id });
    expect(ProviderConnection.parse(connection)).toEqual({
      status: 'ready',
      message:
        "Local repositories: the bare repositories in the server's REPOHOST_LOCAL_DIR (no GitHub App configured)",
      installations: [
        {
          id: 1,
          account: 'local',
          avatar_url: expect.stringMatching(/^data:image\/svg\+xml,/),
          target_type: 'User',
          repository_selection: 'all',
          suspended: false,
          manage_url: '',
        },
      ],
      installation_requests: [],
    });
  });

  it('reports a colliding id instead of listing two repositories under it', async () => {
    // Two names with the same 31-bit FNV-1a hash: the first registered keeps the id.
    expect(localRepositoryId('repo-1003602')).toBe(localRepositoryId('repo-772989'));
    git('init', '--quiet', '--bare', join(dir, 'repo-1003602.git'));
    expect((await list('repo-')).map((r) => r.name)).toEqual(['repo-1003602']);
    git('init', '--quiet', '--bare', join(dir, 'repo-772989.git'));
    expect((await list('repo-')).map((r) => r.name)).toEqual(['repo-1003602']);
    const { repositories } = await request(nc, rpc.repohost.access, {
      owner_id,
      repository_ids: [localRepositoryId('repo-772989')],
    });
    expect(repositories.map((r) => r.name)).toEqual(['repo-1003602']);
  });
});
