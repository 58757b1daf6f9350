import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLogger } from '@threadwork/platform';
import { createBareRepo } from '@threadwork/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { RepositoryMirrors } from './mirrors.js';

// The mirrors are a cache on the runner's disk: one no sandbox used lately goes, with what a runner
// that died left of one on its way in, and the ones in use stay.

const HOUR_MS = 60 * 60_000;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A sandbox root, and a runner git directory that fetched `main` of a new repository. */
function setUp() {
  const root = mkdtempSync(join(tmpdir(), 'threadwork-mirrors-'));
  dirs.push(root);
  const bare = createBareRepo(root, 'app');
  const gitDir = join(root, 'runner.git');
  execFileSync('git', ['init', '-q', '--bare', gitDir]);
  execFileSync('git', ['--git-dir', gitDir, 'fetch', '-q', bare, '+refs/heads/main:refs/remotes/origin/main']);
  const mirrors = new RepositoryMirrors(root, createLogger({ service: 'test', level: 'silent' }));
  return { root, gitDir, mirrors };
}

const hoursAgo = (path: string, hours: number) => {
  const then = new Date(Date.now() - hours * HOUR_MS);
  utimesSync(path, then, then);
};

describe('sweeping the repository mirrors', () => {
  it('removes the ones no sandbox used for the idle time, and keeps the others', async () => {
    const { gitDir, mirrors } = setUp();
    const [old, recent, used] = [1, 2, 3].map((id) => ({ repository_id: id, clone_url: `file:///repo-${id}` }));
    for (const repo of [old!, recent!, used!]) await mirrors.update(repo, gitDir, 'main');
    hoursAgo(mirrors.path(old!), 5);
    hoursAgo(mirrors.path(recent!), 1);
    hoursAgo(mirrors.path(used!), 5);
    // A spare was cloned from this one just now.
    await mirrors.used(used!);

    expect(await mirrors.sweep(3 * HOUR_MS)).toBe(1);
    expect(existsSync(mirrors.path(old!))).toBe(false);
    expect(await mirrors.revision(recent!, 'main')).not.toBeNull();
    expect(await mirrors.revision(used!, 'main')).not.toBeNull();
    // Brought news again, a mirror counts as used.
    hoursAgo(mirrors.path(recent!), 5);
    await mirrors.update(recent!, gitDir, 'main');
    expect(await mirrors.sweep(3 * HOUR_MS)).toBe(0);
  });

  it('removes what a runner that died left on its way in, not what is on its way in now', async () => {
    const { root, gitDir, mirrors } = setUp();
    const repo = { repository_id: 9, clone_url: 'file:///repo-9' };
    await mirrors.update(repo, gitDir, 'main');
    const left = `${mirrors.path(repo)}.partial-0123abcd`;
    const making = `${mirrors.path(repo)}.partial-89abcdef`;
    mkdirSync(left);
    mkdirSync(making);
    hoursAgo(left, 2);

    expect(await mirrors.sweep(3 * HOUR_MS)).toBe(0);
    expect(readdirSync(join(root, '.mirrors')).sort()).toEqual(
      [`${mirrors.path(repo)}`, making].map((p) => p.slice(join(root, '.mirrors').length + 1)).sort(),
    );
  });
});
