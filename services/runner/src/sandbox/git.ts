import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gitEnvironment } from '@threadwork/platform';

// The runner's own git. The agent controls everything in the workspace, `.git` included — its
// config (filters, `url.*.insteadOf`, `core.sshCommand`, credential helpers), its hooks, its
// remotes — so the runner never runs git on a repository the agent can write: each sandbox
// repository has a git directory of the runner's, outside the workspace, used with the workspace
// as its work tree (`GIT_DIR` + `GIT_WORK_TREE`). On top of that every command runs with:
// - no system or global configuration (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`);
// - hooks and the file-system monitor off, and no credential helper but the runner's;
// - nested repositories never looked into: a submodule's check for changes runs git in it, with
//   its own configuration (filters, fsmonitor) — the agent's (see candidate.ts);
// - one transport allowed: the scheme of the repository's canonical URL, which comes with the job
//   (`https`, or `file` for the local provider), never a remote read from a repository;
// - a token handed over by a credential helper reading a file private to that one command, never
//   through an environment variable or an argument another process could read.
// The work tree may belong to the sandbox's own uid (uids.ts) while git runs as root: git's check
// of a repository's owner (`safe.directory`) applies to a repository it discovers, not to the
// explicit GIT_DIR every command here is given, which is the runner's own.

const run = promisify(execFile);

const GIT_MAX_BUFFER = 64 * 1024 * 1024;

export const THREADWORK_AUTHOR = { name: 'Threadwork', email: 'threadwork@localhost' };

/** A repository as the runner works it: its own git directory, and the workspace as work tree. */
export interface GitRepo {
  gitDir: string;
  workTree: string | null;
}

/** The one remote a command may talk to, with the token for it (null when none is needed). */
export interface RemoteAccess {
  url: string;
  token: string | null;
}

export class GitError extends Error {
  override name = 'GitError';
}

/** Options every command gets, ahead of its own: they override whatever a repository's config says. */
const HARDENED = [
  ['core.hooksPath', '/dev/null'],
  ['core.fsmonitor', 'false'],
  // An empty value empties the list of helpers gathered so far (a repository's own included).
  ['credential.helper', ''],
  // A redirect would take the request, and the token with it, to wherever the server says.
  ['http.followRedirects', 'false'],
  ['diff.ignoreSubmodules', 'all'],
  ['status.submoduleSummary', 'false'],
  ['submodule.recurse', 'false'],
  ['fetch.recurseSubmodules', 'false'],
  ['push.recurseSubmodules', 'no'],
].flatMap(([key, value]) => ['-c', `${key}=${value}`]);

/** The transports git may use to reach `url`: its scheme only, for the schemes a repository may have. */
export function allowedProtocol(url: string): string {
  let scheme: string;
  try {
    scheme = new URL(url).protocol.replace(/:$/, '');
  } catch {
    throw new GitError('the repository URL is not a URL');
  }
  if (!['https', 'http', 'file'].includes(scheme))
    throw new GitError(`the repository URL's scheme ${scheme} is not allowed`);
  return scheme;
}

function environment(repo: GitRepo | undefined, allow: string | undefined): NodeJS.ProcessEnv {
  // Nothing of the runner's own environment: only what git needs to run.
  const base = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: tmpdir(), LANG: 'C.UTF-8' };
  return {
    ...gitEnvironment(THREADWORK_AUTHOR, base),
    // Git's own list of transports; nothing (not even a submodule's URL) gets past it.
    GIT_ALLOW_PROTOCOL: allow ?? 'none',
    ...(repo ? { GIT_DIR: repo.gitDir } : {}),
    ...(repo?.workTree ? { GIT_WORK_TREE: repo.workTree } : {}),
  };
}

/**
 * Runs `fn` with the arguments that hand `remote`'s token to git for one command: a credential
 * helper reading it from a file in a directory of its own (mode 0700), removed afterwards, and
 * configured for the remote's origin only — git asks no other host's credentials of it.
 */
async function withCredentials<T>(remote: RemoteAccess | undefined, fn: (args: string[]) => Promise<T>): Promise<T> {
  if (!remote?.token) return fn([]);
  const dir = await mkdtemp(join(tmpdir(), 'threadwork-git-'));
  try {
    const file = join(dir, 'token');
    await writeFile(file, remote.token, { mode: 0o600 });
    // Answers `get` only: git's `store`/`erase` go nowhere.
    const helper = `!f() { test "$1" = get || exit 0; printf 'username=x-access-token\\npassword='; cat '${file}'; printf '\\n'; }; f`;
    return await fn(['-c', `credential.${new URL(remote.url).origin}.helper=${helper}`]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface GitOptions {
  /** The repository; without it git runs in `cwd` on no repository (clone, ls-remote, init). */
  repo?: GitRepo;
  /** The remote this command talks to; without it no transport is allowed. */
  remote?: RemoteAccess;
  /** What the command reads on its standard input. */
  input?: string;
}

export async function git(cwd: string, args: string[], opts: GitOptions = {}): Promise<string> {
  const allow = opts.remote ? allowedProtocol(opts.remote.url) : undefined;
  return withCredentials(opts.remote, async (credentials) => {
    try {
      const running = run('git', [...HARDENED, ...credentials, ...args], {
        cwd,
        env: environment(opts.repo, allow),
        maxBuffer: GIT_MAX_BUFFER,
      });
      if (opts.input !== undefined) running.child.stdin?.end(opts.input);
      const { stdout } = await running;
      return stdout;
    } catch (err) {
      const stderr = (err as { stderr?: string }).stderr?.trim();
      throw new GitError(`git ${args[0]} failed${stderr ? `: ${stderr}` : ''}`, { cause: err });
    }
  });
}

/**
 * Output of a git command, read up to `maxBytes` (+1 to tell that there was more): a diff of a
 * huge change is cut while it is produced instead of being held in memory whole.
 */
export function gitBounded(
  cwd: string,
  repo: GitRepo,
  args: string[],
  maxBytes: number,
): Promise<{ text: string; more: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', [...HARDENED, ...args], {
      cwd,
      env: environment(repo, undefined),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const chunks: Buffer[] = [];
    let size = 0;
    let more = false;
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (more) return;
      chunks.push(chunk);
      size += chunk.length;
      if (size > maxBytes) {
        more = true;
        child.kill('SIGKILL');
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-2_000);
    });
    child.once('error', reject);
    child.once('close', (code) => {
      if (!more && code !== 0) {
        reject(new GitError(`git ${args[0]} failed: ${stderr.trim()}`));
        return;
      }
      resolve({ text: Buffer.concat(chunks).toString('utf8'), more });
    });
  });
}

/** What `ls-remote` answered: whether the remote has no refs at all, and the revisions of the refs asked. */
export interface RemoteSeen {
  empty: boolean;
  revisions: Map<string, string>;
}

/** The revisions of `refs` on the remote (one `ls-remote`); a ref it has not is left out. */
export async function remoteRevisions(cwd: string, remote: RemoteAccess, refs: readonly string[]): Promise<RemoteSeen> {
  const out = await git(cwd, ['ls-remote', '--', remote.url], { remote });
  const revisions = new Map<string, string>();
  for (const line of out.split('\n')) {
    const [revision, ref] = line.split('\t');
    if (revision && ref && refs.includes(ref)) revisions.set(ref, revision);
  }
  return { empty: out.trim() === '', revisions };
}

/**
 * Runs git and hands each NUL-ended record of its output to `record` as it comes, without holding
 * the output: `record` answers false to stop there (git is killed). Resolves whether it stopped.
 */
export function gitRecords(
  cwd: string,
  repo: GitRepo,
  args: string[],
  record: (text: string) => boolean,
): Promise<{ stopped: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', [...HARDENED, ...args], {
      cwd,
      env: environment(repo, undefined),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let rest: Buffer = Buffer.alloc(0);
    let stopped = false;
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      if (stopped) return;
      rest = rest.length === 0 ? chunk : Buffer.concat([rest, chunk]);
      let start = 0;
      for (let end = rest.indexOf(0, start); end >= 0; end = rest.indexOf(0, start)) {
        const text = rest.subarray(start, end).toString('utf8');
        start = end + 1;
        if (!record(text)) {
          stopped = true;
          child.kill('SIGKILL');
          return;
        }
      }
      rest = rest.subarray(start);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-2_000);
    });
    child.once('error', reject);
    child.once('close', (code) => {
      if (!stopped && code !== 0) {
        reject(new GitError(`git ${args[0]} failed: ${stderr.trim()}`));
        return;
      }
      resolve({ stopped });
    });
  });
}
