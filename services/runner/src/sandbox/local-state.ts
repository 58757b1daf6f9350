import { createHash, randomBytes } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunRepository } from '@threadwork/contracts';
import type { SandboxFence } from './provider.js';

// The `local` provider's folders (local.ts): `<SANDBOX_ROOT>/<thread id>/` holds one workspace per
// project repository, `codex-home/` (the harness's state), `git/<folder>.git` (the runner's own git directory of each
// repository, whose work tree is the workspace: see git.ts) and `threadwork.json` (what the runner
// must remember across processes: the sandbox id, the harness session to resume and the process
// serving it, the repositories and their bases) and `takes/` (which run attempt may change the
// sandbox: see take.ts). Each workspace also has a `.git` of the agent's:
// a repository of its own on the thread branch (objects borrowed from the runner's), made anew for
// every run, which the runner never reads.
//
// Where the runner runs as root, each sandbox has a uid of its own (uids.ts), which its jail runs as
// outside: the workspaces, `codex-home/` and `home/` are that uid's; the rest stays root's, out of
// its reach. The sandbox's folder is root's and that uid's group's, mode 0710 (no other sandbox's
// uid passes through it; its own may, not list it); `threadwork.json` is 0600 and `takes/` 0700;
// `git/` and each runner git directory may be passed through (0711) to reach `objects/`, which
// that uid's group may read, and nothing else there (uids.ts, `secureGitDir`).

export const STATE_FILE = 'threadwork.json';
export const HARNESS_HOME = 'codex-home';
export const GIT_DIRS = 'git';
/** The agent's HOME (its dotfiles), apart from the sandbox's state. */
export const AGENT_HOME = 'home';
export const TAKES = 'takes';

export interface RepoState {
  dir: string;
  base_branch: string;
  /** The base the thread branch was cut from, for when the remote branch cannot be read. */
  base_revision: string;
  /**
   * The agent's repository as the run of a take (take.ts) made it anew after its turn: the take, and
   * the repository's fingerprint (agent-repo.ts) then. While that take is still the last when the
   * next run takes the sandbox (no turn has run since) and the fingerprint is the same (nothing
   * changed it), the next run takes the repository as it is.
   */
  agent_at_rest?: { take: string; fingerprint: string };
}

export interface SandboxState {
  sandbox_id: string;
  thread_id: string;
  session_id: string | null;
  /** The harness the session is of (absent in state written before there were two: `codex`). */
  session_harness?: string | null;
  /** The harness process serving the session, by pid and start time (so a reused pid is not taken for it). */
  harness?: { pid: number; start_time: string } | null;
  repos: Record<string, RepoState>;
  /** A run found the sandbox past its bound on disk: the next one rebuilds the workspaces. */
  outgrown?: boolean;
  /** The sandbox's own uid, where the runner gives each one (uids.ts). */
  uid?: number;
}

export const threadBranch = (threadId: string) => `threadwork/${threadId}`;

/** A thread id as one safe folder name (ids are opaque: anything odd is hashed). */
export function folderName(threadId: string): string {
  return /^[A-Za-z0-9_-]{1,128}$/.test(threadId)
    ? threadId
    : `t_${createHash('sha256').update(threadId).digest('hex').slice(0, 32)}`;
}

/**
 * A folder for a repository new to the sandbox, named after it; one already taken (same name, other
 * owner) takes the owner and id too.
 */
export function pickFolder(repo: RunRepository, taken: ReadonlySet<string>): string {
  const clean = (v: string) => v.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_');
  const short = clean(repo.full_name.split('/').pop() ?? repo.full_name);
  return taken.has(short) ? `${clean(repo.full_name.replace('/', '__'))}-${repo.repository_id}` : short;
}

/** Git's id of the empty tree: the base a thread diffs against in a repository with no commits. */
export const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/** The runner's git directory of a workspace folder. */
export function gitDirOf(root: string, folder: string): string {
  return join(root, GIT_DIRS, `${folder}.git`);
}

/** What the runner remembers of a sandbox; null when there is none (or nothing readable). */
export async function readState(dir: string): Promise<SandboxState | null> {
  try {
    return JSON.parse(await readFile(join(dir, STATE_FILE), 'utf8')) as SandboxState;
  } catch {
    return null;
  }
}

/** Written aside and renamed into place, by the attempt that holds the sandbox only. */
export async function writeState(dir: string, state: SandboxState, take: SandboxFence): Promise<void> {
  const tmp = join(dir, `.${STATE_FILE}.${randomBytes(4).toString('hex')}`);
  await writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  try {
    take.check();
    await rename(tmp, join(dir, STATE_FILE));
  } finally {
    await rm(tmp, { force: true });
  }
}
