import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export interface BareRepoOptions {
  /** Default branch (the bare repository's HEAD). */
  branch?: string;
  /** Files of the first commit, path → content. */
  files?: Record<string, string>;
}

/** Who commits in tests, with no system git config to change how git behaves on this machine. */
export const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: 'Threadwork Test',
  GIT_AUTHOR_EMAIL: 'test@threadwork.invalid',
  GIT_COMMITTER_NAME: 'Threadwork Test',
  GIT_COMMITTER_EMAIL: 'test@threadwork.invalid',
  GIT_CONFIG_NOSYSTEM: '1',
};

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, env: gitEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

/**
 * A real bare repository `<dir>/<name>.git` with one commit on `branch`, made with the real git
 * (what the local repository provider serves and the runner clones).
 */
export function createBareRepo(
  dir: string,
  name: string,
  { branch = 'main', files = { 'README.md': `# ${name}\n` } }: BareRepoOptions = {},
): string {
  const work = mkdtempSync(join(tmpdir(), 'threadwork-repo-'));
  try {
    git(work, 'init', '-q', '-b', branch);
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), content);
    }
    git(work, 'add', '-A');
    git(work, 'commit', '-q', '-m', 'initial commit');
    const bare = join(dir, `${name}.git`);
    mkdirSync(dir, { recursive: true });
    git(dir, 'clone', '-q', '--bare', work, bare);
    return bare;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
