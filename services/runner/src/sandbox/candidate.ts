import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DiffFile, ReviewStats } from '@threadwork/contracts';
import { parseNameStatus, parseNumstat } from '../domain/diff.js';
import { cutAtLine } from '../domain/text.js';
import { makeAgentRepo } from './agent-repo.js';
import { git, gitBounded, type GitRepo } from './git.js';
import type { SandboxFence, SandboxRepo } from './provider.js';

// After a run: the workspace committed on the thread branch, and what review needs of it — the
// candidate revision, the diff against the base (bounded), the files and line counts.

export interface Candidate {
  /** Whether this run left changes that were committed now. */
  committed: boolean;
  base_revision: string;
  candidate_revision: string;
  diff: string;
  truncated: boolean;
  files: DiffFile[];
  stats: ReviewStats;
}

export async function commitAndDiff(
  repo: SandboxRepo,
  take: SandboxFence,
  opts: { message: string; maxDiffBytes: number; owner: number | null },
): Promise<Candidate> {
  const mine = { repo: runnerRepo(repo) };
  const cwd = repo.gitDir;
  take.check();
  await addAll(repo);
  const pending = await git(cwd, ['status', '--porcelain', '--ignore-submodules=all'], mine);
  const committed = pending.trim().length > 0;
  take.check();
  if (committed) await git(cwd, ['commit', '--quiet', '--no-verify', '-m', opts.message], mine);
  // A thread in an empty repository that has changed nothing yet has no commit to point at: its
  // branch starts with an empty one, so the candidate is a revision like any other.
  else if (!(await hasCommit(repo))) {
    await git(cwd, ['commit', '--quiet', '--no-verify', '--allow-empty', '-m', opts.message], mine);
  }

  const head = (await git(cwd, ['rev-parse', 'HEAD'], mine)).trim();
  // The agent's repository shows the commit too (a clean status, the branch where it now is).
  await makeAgentRepo(
    mine.repo,
    { url: repo.clone_url, baseBranch: repo.base_branch, branch: repo.branch },
    take,
    opts.owner,
  );
  const base = await baseRevision(repo);
  const range = [base, head, '--'];
  const raw = await gitBounded(
    cwd,
    mine.repo,
    ['diff', '--no-color', '--no-ext-diff', '-M', ...range],
    opts.maxDiffBytes,
  );
  const cut = cutAtLine(raw.text, opts.maxDiffBytes);
  const [nameStatus, numstat] = await Promise.all([
    git(cwd, ['diff', '--no-ext-diff', '--name-status', '-z', '-M', ...range], mine),
    git(cwd, ['diff', '--no-ext-diff', '--numstat', '-z', '-M', ...range], mine),
  ]);
  return {
    committed,
    base_revision: base,
    candidate_revision: head,
    diff: cut.text,
    truncated: raw.more || cut.truncated,
    files: parseNameStatus(nameStatus),
    stats: parseNumstat(numstat),
  };
}

/**
 * Stages the workspace as it is, but for the repositories nested in it (a `.git` below the top:
 * one the agent made or cloned, or a submodule it checked out). Git would record each as a
 * submodule and, to see whether it changed, run git inside it with that repository's own
 * configuration — the agent's, filters and fsmonitor included — outside the jail. They stay out of
 * the commit; a submodule the repository already had keeps the revision it had.
 */
async function addAll(repo: SandboxRepo): Promise<void> {
  const mine = { repo: runnerRepo(repo) };
  const cwd = repo.gitDir;
  // Listing looks for `.git` entries only: no git runs in them. An untracked nested repository
  // shows as its directory, `path/`.
  const untracked = (await git(cwd, ['ls-files', '-z', '--others', '--exclude-standard'], mine))
    .split('\0')
    .filter((path) => path.endsWith('/'))
    .map((path) => path.slice(0, -1));
  const submodules = (await git(cwd, ['ls-files', '-z', '--stage'], mine))
    .split('\0')
    .filter((entry) => entry.startsWith('160000 '))
    .map((entry) => entry.slice(entry.indexOf('\t') + 1));
  const nested = [...new Set([...untracked, ...submodules])];
  if (nested.length === 0) {
    await git(cwd, ['add', '-A'], mine);
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), 'threadwork-add-'));
  try {
    const pathspecs = join(dir, 'pathspecs');
    await writeFile(pathspecs, ['.', ...nested.map((path) => `:(exclude,top,literal)${path}`)].join('\0'));
    await git(cwd, ['add', '-A', `--pathspec-from-file=${pathspecs}`, '--pathspec-file-nul'], mine);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The runner's repository for a workspace: its own git directory, the workspace as work tree. */
export function runnerRepo(repo: SandboxRepo): GitRepo {
  return { gitDir: repo.gitDir, workTree: repo.dir };
}

/** Where the thread branch left the base branch, as far as the last fetch knows; else where it was cut. */
async function baseRevision(repo: SandboxRepo): Promise<string> {
  try {
    const ref = `refs/remotes/origin/${repo.base_branch}`;
    return (await git(repo.gitDir, ['merge-base', 'HEAD', ref], { repo: runnerRepo(repo) })).trim();
  } catch {
    return repo.recorded_base;
  }
}

async function hasCommit(repo: SandboxRepo): Promise<boolean> {
  try {
    await git(repo.gitDir, ['rev-parse', '--verify', '--quiet', 'HEAD'], { repo: runnerRepo(repo) });
    return true;
  } catch {
    return false;
  }
}
