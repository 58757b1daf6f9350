import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { lstat, mkdir, opendir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { git, type GitRepo } from './git.js';
import { handOver } from './uids.js';

// The agent's own repository in a workspace (`<workspace>/.git`). The agent may do anything to it —
// commit, rewrite history, add hooks or config — and the runner never runs git on it: the runner's
// git directory is elsewhere (git.ts). It is made anew from the runner's after every turn (with the
// commit, candidate.ts) and at the start of every run but one that finds it exactly as that was
// made (no turn since, its fingerprint unchanged, the base not moved: RepoState.agent_at_rest), so
// the agent always finds the thread branch as it stands and a clean status; what the agent did to
// the previous one is gone, its files are not touched.
// Where the sandbox has a uid of its own, the repository is that uid's, like the rest of the workspace.

export interface AgentRepoShape {
  /** The repository's URL, as the agent's `origin` (it holds no credential). */
  url: string;
  baseBranch: string;
  /** The thread branch, checked out. */
  branch: string;
}

/**
 * Replaces the workspace's `.git` with a fresh repository on the runner's current revision: the
 * thread branch and `origin/<base>` at the runner's revisions, the index matching the branch, the
 * objects borrowed from the runner's repository (`alternates`), nothing copied. `take` throws when
 * the workspace is no longer the caller's to change. `owner`: the sandbox's uid, which gets it.
 */
export async function makeAgentRepo(
  runner: GitRepo,
  shape: AgentRepoShape,
  take: { check(): void },
  owner: number | null,
): Promise<void> {
  const aside = join(dirname(runner.gitDir), `.agent-git-${randomBytes(4).toString('hex')}`);
  try {
    await buildAgentRepo(runner, shape, aside);
    await placeAgentRepo(aside, runner, take, owner);
  } finally {
    await rm(aside, { recursive: true, force: true });
  }
}

/**
 * Makes the agent's repository of `runner` (as makeAgentRepo describes it) at `aside`, a path
 * beside the runner's git directory (a place of the runner's), for placeAgentRepo to move in.
 */
export async function buildAgentRepo(runner: GitRepo, shape: AgentRepoShape, aside: string): Promise<void> {
  const workTree = runner.workTree;
  if (!workTree) throw new Error('the runner repository has no work tree');
  const cwd = dirname(runner.gitDir);
  const [head, base] = await Promise.all([
    revision(cwd, runner, 'HEAD'),
    revision(cwd, runner, `refs/remotes/origin/${shape.baseBranch}`),
  ]);
  // Written as `git init` would write it (a process fewer per file on every run's way to its
  // turn); the refs go through git, which checks their names.
  await mkdir(join(aside, 'objects', 'info'), { recursive: true });
  await mkdir(join(aside, 'objects', 'pack'));
  await mkdir(join(aside, 'refs', 'heads'), { recursive: true });
  await mkdir(join(aside, 'refs', 'tags'));
  await mkdir(join(aside, 'hooks'));
  await mkdir(join(aside, 'info'));
  await writeFile(join(aside, 'info', 'exclude'), INFO_EXCLUDE);
  await writeFile(join(aside, 'description'), DESCRIPTION);
  await writeFile(join(aside, 'config'), agentConfig(shape.url));
  await writeFile(join(aside, 'objects', 'info', 'alternates'), `${join(runner.gitDir, 'objects')}\n`);
  const agent = { repo: { gitDir: aside, workTree } };
  const refs = [
    ...(head ? [`update refs/heads/${shape.branch} ${head}`] : []),
    ...(base ? [`update refs/remotes/origin/${shape.baseBranch} ${base}`] : []),
  ];
  await writeFile(join(aside, 'HEAD'), 'ref: refs/heads/main\n');
  if (refs.length > 0) await git(cwd, ['update-ref', '--stdin'], { ...agent, input: `${refs.join('\n')}\n` });
  await git(cwd, ['symbolic-ref', 'HEAD', `refs/heads/${shape.branch}`], agent);
  // The index only: read-tree does not look at the work tree, whatever the agent left there.
  if (head) await git(cwd, ['read-tree', head], agent);
}

/**
 * Moves the agent's repository made at `aside` (buildAgentRepo) into `runner`'s work tree as its
 * `.git`, in place of whatever is there; handed over to `owner` first, as the runner runs no git on
 * it from here on.
 */
export async function placeAgentRepo(
  aside: string,
  runner: GitRepo,
  take: { check(): void },
  owner: number | null,
): Promise<void> {
  const workTree = runner.workTree;
  if (!workTree) throw new Error('the runner repository has no work tree');
  if (owner !== null) await handOver([aside], owner);
  take.check();
  await removeAgentTree(join(workTree, '.git'), dirname(runner.gitDir));
  await rename(aside, join(workTree, '.git'));
}

/**
 * Renames the checked-out branch of an agent repository made at `aside` (buildAgentRepo) and not
 * yet placed: its ref, its log and HEAD, as `git branch -m` would, without a process. Only for
 * names git has taken before: `from` was made by buildAgentRepo, and the caller has git check `to`.
 */
export async function renameAgentBranch(aside: string, from: string, to: string): Promise<void> {
  if (!SAFE_BRANCH.test(from) || !SAFE_BRANCH.test(to)) throw new Error(`refusing to rename ${from} to ${to}`);
  for (const refs of ['refs/heads', 'logs/refs/heads']) {
    const source = join(aside, refs, from);
    if (!(await lstat(source).catch(() => null))?.isFile()) continue;
    await mkdir(dirname(join(aside, refs, to)), { recursive: true });
    await rename(source, join(aside, refs, to));
  }
  await writeFile(join(aside, 'HEAD'), `ref: refs/heads/${to}\n`);
}

/** Branch names of path segments of letters, digits, `.`, `_` and `-`, none starting with `.`, no `..`. */
const SAFE_BRANCH = /^(?!.*\.\.)(?!\.)[\w.-]+(\/(?!\.)[\w.-]+)*$/;

/** More entries than a repository made here has by far: the agent grew it, and it is made anew. */
const FINGERPRINT_MAX_ENTRIES = 1_000;

/**
 * What the agent's repository of `workTree` is on disk now: every entry of its `.git` (never
 * followed through a link) by path, type and mode, inode, size and change time, hashed; null when
 * there is no such directory or more than FINGERPRINT_MAX_ENTRIES. Nothing but the kernel sets a
 * change time, so a repository with the fingerprint it had when the runner made it is that
 * repository untouched (objects are borrowed, so it is a few dozen entries).
 */
export async function agentRepoFingerprint(workTree: string): Promise<string | null> {
  const top = join(workTree, '.git');
  const hash = createHash('sha256');
  const pending = [''];
  let entries = 0;
  while (pending.length > 0) {
    const relative = pending.pop()!;
    const path = relative ? join(top, relative) : top;
    const stat = await lstat(path, { bigint: true }).catch(() => null);
    if (!stat || (relative === '' && !stat.isDirectory())) return null;
    if (++entries > FINGERPRINT_MAX_ENTRIES) return null;
    hash.update(`${relative}\0${stat.mode}\0${stat.ino}\0${stat.size}\0${stat.ctimeNs}\n`);
    if (stat.isDirectory()) {
      // Read entry by entry, so a directory the agent filled with millions is not read whole.
      const names: string[] = [];
      try {
        for await (const entry of await opendir(path)) {
          if (entries + pending.length + names.length >= FINGERPRINT_MAX_ENTRIES) return null;
          names.push(entry.name);
        }
      } catch {
        return null;
      }
      for (const name of names.sort().reverse()) pending.push(relative ? join(relative, name) : name);
    }
  }
  return hash.digest('hex');
}

/** A revision of a repository, or null when the name does not resolve (no commit yet). */
export async function revision(cwd: string, repo: GitRepo, name: string): Promise<string | null> {
  try {
    return (await git(cwd, ['rev-parse', '--verify', '--quiet', `${name}^{commit}`], { repo })).trim() || null;
  } catch {
    return null;
  }
}

/** What `git init` writes in `info/exclude` and `description` (its hooks are samples only, left out). */
const INFO_EXCLUDE = [
  '# git ls-files --others --exclude-from=.git/info/exclude',
  "# Lines that start with '#' are comments.",
  '# For a project mostly in C, the following would be a good set of',
  '# exclude patterns (uncomment them if you want to use them):',
  '# *.[oa]',
  '# *~',
  '',
].join('\n');
const DESCRIPTION = "Unnamed repository; edit this file 'description' to name the repository.\n";

/** The agent repository's `config`, as `git init` then `git config` would leave it. */
function agentConfig(url: string): string {
  // A value in double quotes, with what git's config syntax escapes escaped.
  const quoted = `"${url.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n').replace(/\t/g, '\\t')}"`;
  return [
    '[core]',
    '\trepositoryformatversion = 0',
    '\tfilemode = true',
    '\tbare = false',
    '[remote "origin"]',
    `\turl = ${quoted}`,
    '\tfetch = +refs/heads/*:refs/remotes/origin/*',
    '',
  ].join('\n');
}

/**
 * Removes a tree the agent can write while processes of its jail may still run (the harness kept
 * warm, what it started). A removal by path, as the runner's user, would follow a directory the
 * agent swaps for a link to anywhere in the middle of it. So the tree first leaves every path the
 * jail sees — renamed, whole, into `privateDir` (the runner's, on the same filesystem) — and is then
 * removed by coreutils' `rm`, which descends by directory handle and never through a link. A link
 * the agent put in place of the tree is moved, and removed, as a link.
 */
export async function removeAgentTree(path: string, privateDir: string): Promise<void> {
  const trash = join(privateDir, `.trash-${randomBytes(6).toString('hex')}`);
  try {
    await rename(path, trash);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return;
    if (code !== 'EXDEV') throw err;
    await promisify(execFile)('rm', ['-rf', '--one-file-system', '--', path]);
    return;
  }
  await promisify(execFile)('rm', ['-rf', '--one-file-system', '--', trash]);
}
