// Git objects in and out of a sandbox's repository as bundles over exec. The pod here is a stand-in
// (localExec), a local directory and process, which shows what the runner's commands do with real
// git on both sides; the same commands through the exec API are in test/cluster/sandbox-pods.test.ts.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BundleError, receiveTree, sendBranch } from './bundle.js';
import { localExec, type PodExec } from './exec.js';

const BRANCH = 'threadwork/thr_1';
let root: string;
let gitDir: string;
let podRepo: string;
let base: string;

const sh = (cwd: string, args: string[], env: Record<string, string> = {}) =>
  execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      HOME: root,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@t',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@t',
      ...env,
    },
  }).trim();

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'threadwork-bundle-test-'));
  // The runner's git directory, as a clone would leave it: the thread branch with one commit.
  const seed = join(root, 'seed');
  mkdirSync(seed);
  sh(seed, ['init', '-q', '-b', 'main']);
  writeFileSync(join(seed, 'README.md'), 'hello\n');
  writeFileSync(join(seed, '.gitignore'), 'node_modules/\n');
  sh(seed, ['add', '-A']);
  sh(seed, ['commit', '-q', '-m', 'base']);
  gitDir = join(root, 'runner.git');
  sh(root, ['clone', '-q', '--bare', seed, gitDir]);
  sh(root, ['--git-dir', gitDir, 'branch', BRANCH, 'main']);
  sh(root, ['--git-dir', gitDir, 'remote', 'remove', 'origin']);
  base = sh(root, ['--git-dir', gitDir, 'rev-parse', `refs/heads/${BRANCH}`]);
  podRepo = join(root, 'pod', 'workspace', 'repo');
  mkdirSync(join(root, 'pod', 'workspace'), { recursive: true });
});

afterEach(() => rmSync(root, { recursive: true, force: true }));

const repo = () => ({ gitDir, workTree: null });

describe('git bundles in and out of a sandbox', () => {
  it('puts the thread branch into the pod’s repository, checked out, with no remote', async () => {
    await sendBranch(localExec(), { repo: repo(), branch: BRANCH, podRepo });
    expect(readFileSync(join(podRepo, 'README.md'), 'utf8')).toBe('hello\n');
    expect(sh(podRepo, ['rev-parse', 'HEAD'])).toBe(base);
    expect(sh(podRepo, ['symbolic-ref', 'HEAD'])).toBe(`refs/heads/${BRANCH}`);
    expect(sh(podRepo, ['remote', '-v'])).toBe('');
    expect(readFileSync(join(podRepo, '.git', 'config'), 'utf8')).not.toMatch(/url\s*=|credential|token/);

    // A second run: the agent's remote and its edits to tracked files are gone, untracked files stay.
    sh(podRepo, ['remote', 'add', 'exfil', 'https://attacker.example.com/x.git']);
    writeFileSync(join(podRepo, 'README.md'), 'edited\n');
    mkdirSync(join(podRepo, 'node_modules'));
    writeFileSync(join(podRepo, 'node_modules', 'dep.js'), '1');
    await sendBranch(localExec(), { repo: repo(), branch: BRANCH, podRepo });
    expect(sh(podRepo, ['remote', '-v'])).toBe('');
    expect(readFileSync(join(podRepo, 'README.md'), 'utf8')).toBe('hello\n');
    expect(existsSync(join(podRepo, 'node_modules', 'dep.js'))).toBe(true);
  });

  it('makes the pod’s repository anew, keeping the agent’s files when asked to', async () => {
    await sendBranch(localExec(), { repo: repo(), branch: BRANCH, podRepo });
    writeFileSync(join(podRepo, 'README.md'), 'edited by a turn that was lost\n');
    // A `.git` the agent broke (a file where the directory was) is replaced, not used.
    rmSync(join(podRepo, '.git'), { recursive: true, force: true });
    writeFileSync(join(podRepo, '.git'), 'gitdir: /nowhere\n');
    await sendBranch(localExec(), { repo: repo(), branch: BRANCH, podRepo, files: 'index' });
    expect(readFileSync(join(podRepo, 'README.md'), 'utf8')).toBe('edited by a turn that was lost\n');
    expect(sh(podRepo, ['rev-parse', 'HEAD'])).toBe(base);
    expect(sh(podRepo, ['status', '--porcelain'])).toBe('M README.md');

    // An empty work tree gets the branch's files even so.
    const fresh = join(root, 'pod', 'workspace', 'fresh');
    await sendBranch(localExec(), { repo: repo(), branch: BRANCH, podRepo: fresh, files: 'index' });
    expect(readFileSync(join(fresh, 'README.md'), 'utf8')).toBe('hello\n');
    expect(sh(fresh, ['status', '--porcelain'])).toBe('');
  });

  it('takes the agent’s work out as a tree on the base, into a ref of the runner’s', async () => {
    await sendBranch(localExec(), { repo: repo(), branch: BRANCH, podRepo });
    writeFileSync(join(podRepo, 'README.md'), 'changed by the agent\n');
    sh(podRepo, ['commit', '-qam', 'the agent’s own commit']);
    writeFileSync(join(podRepo, 'new.txt'), 'new\n');
    mkdirSync(join(podRepo, 'node_modules'), { recursive: true });
    writeFileSync(join(podRepo, 'node_modules', 'ignored.js'), 'x');
    // The agent's own commit and a hook it planted: neither changes what the runner takes.
    writeFileSync(
      join(podRepo, '.git', 'hooks', 'pre-commit'),
      `#!/bin/sh\necho planted > '${join(root, 'hook-ran')}'\n`,
      {
        mode: 0o755,
      },
    );
    const tree = await receiveTree(localExec(), {
      repo: repo(),
      podRepo,
      base,
      into: 'refs/threadwork/received',
      maxBytes: 1024 * 1024,
    });
    const at = (path: string) => sh(root, ['--git-dir', gitDir, 'show', `${tree}:${path}`]);
    expect(at('README.md')).toBe('changed by the agent');
    expect(at('new.txt')).toBe('new');
    expect(sh(root, ['--git-dir', gitDir, 'ls-tree', '-r', '--name-only', tree]).split('\n').sort()).toEqual([
      '.gitignore',
      'README.md',
      'new.txt',
    ]);
    expect(sh(root, ['--git-dir', gitDir, 'rev-parse', 'refs/threadwork/received^']).trim()).toBe(base);
    expect(existsSync(join(root, 'hook-ran'))).toBe(false);
    // The runner's branch did not move: only its own commit will move it.
    expect(sh(root, ['--git-dir', gitDir, 'rev-parse', `refs/heads/${BRANCH}`])).toBe(base);
  });

  it('refuses what a hostile pod sends instead of a bundle, or too much of it', async () => {
    await sendBranch(localExec(), { repo: repo(), branch: BRANCH, podRepo });
    const lying: PodExec = {
      run: (_argv, io = {}) => localExec().run(['sh', '-c', 'printf "# v2 git bundle\\nnot a bundle at all\\n"'], io),
    };
    await expect(
      receiveTree(lying, { repo: repo(), podRepo, base, into: 'refs/threadwork/received', maxBytes: 1024 * 1024 }),
    ).rejects.toThrow(BundleError);
    const flooding: PodExec = {
      run: (_argv, io = {}) => localExec().run(['sh', '-c', 'head -c 2000000 /dev/zero'], io),
    };
    await expect(
      receiveTree(flooding, { repo: repo(), podRepo, base, into: 'refs/threadwork/received', maxBytes: 64 * 1024 }),
    ).rejects.toThrow(/larger than 65536 bytes/);
    const failing: PodExec = { run: () => Promise.resolve({ code: 3, stderr: 'no repo' }) };
    await expect(
      receiveTree(failing, { repo: repo(), podRepo, base, into: 'refs/threadwork/received', maxBytes: 1024 }),
    ).rejects.toThrow(/exit 3\): no repo/);
    expect(() => sh(root, ['--git-dir', gitDir, 'rev-parse', '--verify', '-q', 'refs/threadwork/received'])).toThrow();
  });

  it('refuses a commit the pod made on another base', async () => {
    await sendBranch(localExec(), { repo: repo(), branch: BRANCH, podRepo });
    // A pod that answers with a bundle of a commit off the base it was given (a root commit of its own).
    const forging: PodExec = {
      run: (_argv, io = {}) =>
        localExec().run(
          [
            'sh',
            '-c',
            `set -e; cd "$1"; t=$(git write-tree); c=$(GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a git commit-tree "$t" -m forged); git update-ref refs/threadwork/snapshot "$c"; b=$(mktemp); git bundle create -q "$b" refs/threadwork/snapshot 2>/dev/null; cat "$b"; rm -f "$b"`,
            'sh',
            podRepo,
          ],
          io,
        ),
    };
    await expect(
      receiveTree(forging, { repo: repo(), podRepo, base, into: 'refs/threadwork/received', maxBytes: 1024 * 1024 }),
    ).rejects.toThrow(/not on the revision it was given/);
    expect(() => sh(root, ['--git-dir', gitDir, 'rev-parse', '--verify', '-q', 'refs/threadwork/received'])).toThrow();
  });

  it('runs none of the agent’s git configuration in the pod: its clean filters never see the work', async () => {
    await sendBranch(localExec(), { repo: repo(), branch: BRANCH, podRepo });
    const home = join(root, 'pod', 'home');
    mkdirSync(home, { recursive: true });
    const ran = join(root, 'filter-ran');
    // Filters that would inflate what git stores, in the repository's config and in HOME's.
    const inflate = `sh -c 'touch ${ran}; cat; head -c 1000000 /dev/zero | tr "\\\\0" x'`;
    sh(podRepo, ['config', 'filter.inflate.clean', inflate]);
    sh(root, ['config', '--file', join(home, '.gitconfig'), 'filter.home.clean', inflate]);
    writeFileSync(join(podRepo, '.gitattributes'), '*.txt filter=inflate\n*.md filter=home\n');
    writeFileSync(join(podRepo, 'work.txt'), 'the real content\n');
    writeFileSync(join(podRepo, 'README.md'), 'the real readme\n');
    const tree = await receiveTree(localExec({ HOME: home }), {
      repo: repo(),
      podRepo,
      base,
      into: 'refs/threadwork/received',
      maxBytes: 1024 * 1024,
    });
    const at = (path: string) => sh(root, ['--git-dir', gitDir, 'show', `${tree}:${path}`]);
    expect(at('work.txt')).toBe('the real content');
    expect(at('README.md')).toBe('the real readme');
    expect(existsSync(ran)).toBe(false);
  });

  it('runs no smudge filter of the agent’s HOME when putting the branch into the pod', async () => {
    const home = join(root, 'pod', 'home');
    mkdirSync(home, { recursive: true });
    const ran = join(root, 'smudge-ran');
    const config = join(home, '.gitconfig');
    sh(root, ['config', '--file', config, 'filter.home.smudge', `sh -c 'touch ${ran}; echo smudged'`]);
    sh(root, ['config', '--file', config, 'core.attributesFile', join(home, '.gitattributes')]);
    writeFileSync(join(home, '.gitattributes'), '* filter=home\n');
    await sendBranch(localExec({ HOME: home }), { repo: repo(), branch: BRANCH, podRepo });
    expect(readFileSync(join(podRepo, 'README.md'), 'utf8')).toBe('hello\n');
    expect(existsSync(ran)).toBe(false);
  });

  it('refuses a tree that expands past its bounds, whatever the pod writes, and leaves the ref as it was', async () => {
    // A commit on the base made on the runner's side, small as a bundle and large checked out.
    const work = join(root, 'hostile');
    sh(root, ['clone', '-q', '--branch', BRANCH, gitDir, work]);
    writeFileSync(join(work, 'zeros.bin'), Buffer.alloc(3 * 1024 * 1024));
    mkdirSync(join(work, 'many'));
    for (let i = 0; i < 50; i++) writeFileSync(join(work, 'many', `f${i}`), '');
    sh(work, ['add', '-A']);
    sh(work, ['commit', '-q', '-m', 'large']);
    sh(work, ['update-ref', 'refs/threadwork/snapshot', 'HEAD']);
    const file = join(root, 'hostile.bundle');
    sh(work, ['bundle', 'create', '-q', file, 'refs/threadwork/snapshot', `^${base}`]);
    // The pod writes those bytes on the SEND script's stdout itself.
    const emitting: PodExec = { run: (_argv, io = {}) => localExec().run(['cat', file], io) };
    const take = (tree: { maxBytes?: number; maxEntries?: number }) =>
      receiveTree(emitting, {
        repo: repo(),
        podRepo,
        base,
        into: 'refs/threadwork/received',
        maxBytes: 1024 * 1024,
        tree,
      });
    await expect(take({ maxBytes: 2 * 1024 * 1024 })).rejects.toThrow(/too large to take: more than 2097152 bytes/);
    expect(() => sh(root, ['--git-dir', gitDir, 'rev-parse', '--verify', '-q', 'refs/threadwork/received'])).toThrow();
    await expect(take({ maxEntries: 40 })).rejects.toThrow(/too large to take: more than 40 entries/);
    expect(() => sh(root, ['--git-dir', gitDir, 'rev-parse', '--verify', '-q', 'refs/threadwork/received'])).toThrow();
    // Within the bounds, the same bundle is taken.
    const tree = await take({ maxBytes: 4 * 1024 * 1024, maxEntries: 100 });
    expect(sh(root, ['--git-dir', gitDir, 'cat-file', '-s', `${tree}:zeros.bin`])).toBe(String(3 * 1024 * 1024));
  });

  it('cuts off a pod that never answers, moving a bundle either way', async () => {
    const stalled: PodExec = { run: (_argv, io = {}) => localExec().run(['sleep', '1000'], io) };
    await expect(sendBranch(stalled, { repo: repo(), branch: BRANCH, podRepo, timeoutMs: 300 })).rejects.toThrow(
      /putting the branch into the sandbox did not finish within 0.3 s/,
    );
    await expect(
      receiveTree(stalled, {
        repo: repo(),
        podRepo,
        base,
        into: 'refs/threadwork/received',
        maxBytes: 1024 * 1024,
        timeoutMs: 300,
      }),
    ).rejects.toThrow(/taking the work out of the sandbox did not finish within 0.3 s/);
  });

  it('refuses a branch or base that is not one', async () => {
    await expect(sendBranch(localExec(), { repo: repo(), branch: '--upload-pack=x', podRepo })).rejects.toThrow(
      BundleError,
    );
    await expect(
      receiveTree(localExec(), { repo: repo(), podRepo, base: 'HEAD', into: 'refs/threadwork/r', maxBytes: 1 }),
    ).rejects.toThrow(/not a revision/);
  });
});
