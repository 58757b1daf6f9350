import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeAgentRepo, removeAgentTree } from './agent-repo.js';
import { git } from './git.js';

// The runner replaces the agent's `.git` while the agent's processes may still run beside it. One
// that swaps a directory of that tree for a link, the moment the removal has begun, must not make
// the runner remove what the link names.

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('removing a tree the agent can write', () => {
  it('never follows a directory swapped for a link while it is being removed', async () => {
    for (let round = 0; round < 3; round++) {
      const root = mkdtempSync(join(tmpdir(), 'threadwork-agent-tree-'));
      dirs.push(root);
      const tree = join(root, 'workspace', '.git');
      const privateDir = join(root, 'git');
      const victim = join(root, 'victim');
      mkdirSync(join(tree, 'd1', 'precious'), { recursive: true });
      mkdirSync(privateDir);
      mkdirSync(join(victim, 'precious'), { recursive: true });
      writeFileSync(join(victim, 'precious', 'keep.txt'), 'mine');
      for (let i = 0; i < 4000; i++) writeFileSync(join(tree, 'd1', `f${i}`), '');

      // The agent: from inside the tree (its working directory), as soon as entries start to go,
      // it moves the directory aside and puts a link to the victim in its place.
      const ready = join(root, 'ready');
      const attacker = spawn(
        '/bin/bash',
        [
          '-c',
          'touch "$1"; while :; do n=$(ls d1 2>/dev/null | wc -l); if [ "$n" -lt 3990 ]; then mv d1 d1x && ln -s "$2" d1; exit 0; fi; done',
          'attacker',
          ready,
          victim,
        ],
        { cwd: tree, stdio: 'ignore' },
      );
      try {
        await expect.poll(() => existsSync(ready), { timeout: 30_000 }).toBe(true);
        await removeAgentTree(tree, privateDir).catch(() => undefined);
      } finally {
        attacker.kill('SIGKILL');
      }
      expect(existsSync(join(victim, 'precious', 'keep.txt')), `round ${round}`).toBe(true);
      expect(existsSync(tree)).toBe(false);
    }
  });

  it('removes a link put in place of the tree as a link', async () => {
    const root = mkdtempSync(join(tmpdir(), 'threadwork-agent-tree-'));
    dirs.push(root);
    const victim = join(root, 'victim');
    mkdirSync(join(victim, 'inside'), { recursive: true });
    mkdirSync(join(root, 'workspace'));
    mkdirSync(join(root, 'git'));
    symlinkSync(victim, join(root, 'workspace', '.git'));
    await removeAgentTree(join(root, 'workspace', '.git'), join(root, 'git'));
    expect(existsSync(join(root, 'workspace', '.git'))).toBe(false);
    expect(existsSync(join(victim, 'inside'))).toBe(true);
  });
});

/** A runner's git directory with one commit, its work tree a workspace of its own. */
async function runnerRepo() {
  const root = mkdtempSync(join(tmpdir(), 'threadwork-agent-repo-'));
  dirs.push(root);
  const workTree = join(root, 'app');
  const runner = { gitDir: join(root, 'git', 'app.git'), workTree };
  mkdirSync(workTree);
  writeFileSync(join(workTree, 'README.md'), '# App\n');
  await git(root, ['init', '--quiet', '--bare', '--', runner.gitDir]);
  await git(root, ['config', 'core.bare', 'false'], { repo: runner });
  await git(root, ['add', '-A'], { repo: runner });
  await git(root, ['commit', '--quiet', '-m', 'base'], { repo: runner });
  return { root, workTree, runner };
}

describe('the agent repository', () => {
  it('is a repository of its own on the thread branch, clean, with origin and the base as the runner has them', async () => {
    const { root, workTree, runner } = await runnerRepo();
    await git(root, ['update-ref', 'refs/remotes/origin/main', 'HEAD'], { repo: runner });
    await git(root, ['checkout', '--quiet', '-B', 'threadwork/thr_1'], { repo: runner });
    writeFileSync(join(workTree, 'new.txt'), 'new\n');
    await git(root, ['add', '-A'], { repo: runner });
    await git(root, ['commit', '--quiet', '-m', 'the thread'], { repo: runner });
    const url = 'https://example.test/a "quoted" \\ path.git';

    await makeAgentRepo(runner, { url, baseBranch: 'main', branch: 'threadwork/thr_1' }, { check() {} }, null);

    const agent = (...args: string[]) =>
      execFileSync('git', ['-c', 'safe.directory=*', ...args], { cwd: workTree, encoding: 'utf8' }).trim();
    expect(agent('rev-parse', '--abbrev-ref', 'HEAD')).toBe('threadwork/thr_1');
    expect(agent('status', '--porcelain')).toBe('');
    expect(agent('config', 'remote.origin.url')).toBe(url);
    expect(agent('log', '--format=%s')).toBe('the thread\nbase');
    expect(agent('rev-parse', 'origin/main')).toBe(agent('rev-parse', 'HEAD~1'));
    expect(agent('fsck', '--no-progress')).toBe('');
    // Laid out as `git init` lays one out: an agent may write its hooks and excludes where git keeps them.
    for (const path of ['hooks', 'info/exclude', 'description', 'refs/tags', 'objects/pack']) {
      expect(existsSync(join(workTree, '.git', path)), path).toBe(true);
    }
    // Its own objects store is empty: everything is borrowed from the runner's.
    expect(agent('count-objects')).toMatch(/^0 objects/);
  });

  it('refuses a branch name git would refuse, leaving the workspace without one', async () => {
    const { root, workTree, runner } = await runnerRepo();
    await expect(
      makeAgentRepo(
        runner,
        { url: 'https://example.test/a.git', baseBranch: 'main', branch: 'x/../../escape' },
        { check() {} },
        null,
      ),
    ).rejects.toThrow(/update-ref/);
    expect(existsSync(join(workTree, '.git'))).toBe(false);
    expect(existsSync(join(root, 'escape'))).toBe(false);
  });
});
