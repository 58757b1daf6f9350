import type { DiffFile, ReviewStats } from '@threadwork/contracts';
import { parseNameStatus, parseNumstat } from '../domain/diff.js';
import { cutAtLine } from '../domain/text.js';
import { git, gitBounded } from './git.js';
import type { SandboxRepo } from './provider.js';

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
  home: string,
  opts: { message: string; maxDiffBytes: number },
): Promise<Candidate> {
  await git(repo.dir, home, ['add', '-A']);
  const pending = await git(repo.dir, home, ['status', '--porcelain']);
  const committed = pending.trim().length > 0;
  if (committed) await git(repo.dir, home, ['commit', '--quiet', '--no-verify', '-m', opts.message]);
  // A thread in an empty repository that has changed nothing yet has no commit to point at: its
  // branch starts with an empty one, so the candidate is a revision like any other.
  else if (!(await hasCommit(repo.dir, home))) {
    await git(repo.dir, home, ['commit', '--quiet', '--no-verify', '--allow-empty', '-m', opts.message]);
  }

  const head = (await git(repo.dir, home, ['rev-parse', 'HEAD'])).trim();
  const base = await baseRevision(repo, home);
  const range = [base, head];
  const raw = await gitBounded(
    repo.dir,
    home,
    ['diff', '--no-color', '--no-ext-diff', '-M', ...range],
    opts.maxDiffBytes,
  );
  const cut = cutAtLine(raw.text, opts.maxDiffBytes);
  const [nameStatus, numstat] = await Promise.all([
    git(repo.dir, home, ['diff', '--name-status', '-z', '-M', ...range]),
    git(repo.dir, home, ['diff', '--numstat', '-z', '-M', ...range]),
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

/** Where the thread branch left the base branch, as far as the last fetch knows; else where it was cut. */
async function baseRevision(repo: SandboxRepo, home: string): Promise<string> {
  try {
    return (await git(repo.dir, home, ['merge-base', 'HEAD', `origin/${repo.base_branch}`])).trim();
  } catch {
    return repo.recorded_base;
  }
}

async function hasCommit(dir: string, home: string): Promise<boolean> {
  try {
    await git(dir, home, ['rev-parse', '--verify', '--quiet', 'HEAD']);
    return true;
  } catch {
    return false;
  }
}
