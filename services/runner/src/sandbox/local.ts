import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunJob, RunRepository, SandboxStatus } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import { killTree, startTime } from '../harness/processes.js';
import { makeAgentRepo } from './agent-repo.js';
import { DiskMeasureError, measureDisk, type DiskUsage } from './disk.js';
import { SandboxTake, SandboxTakenError, type SandboxClaim } from './take.js';
import { git, remoteRevisions, type RemoteAccess } from './git.js';
import { ensureOwned, handOver, secureGitDir, type SandboxUids } from './uids.js';
import {
  SandboxError,
  type Sandbox,
  type SandboxProvider,
  type SandboxRepo,
  type RepositoryCredentials,
  type SandboxStatusPublisher,
  type SandboxFence,
} from './provider.js';

// The `local` provider: `<SANDBOX_ROOT>/<thread id>/` holds one workspace per project repository,
// `codex-home/` (the harness's state), `git/<folder>.git` (the runner's own git directory of each
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

const STATE_FILE = 'threadwork.json';
const HARNESS_HOME = 'codex-home';
const GIT_DIRS = 'git';
/** The agent's HOME (its dotfiles), apart from the sandbox's state. */
const AGENT_HOME = 'home';
const TAKES = 'takes';

interface RepoState {
  dir: string;
  base_branch: string;
  /** The base the thread branch was cut from, for when the remote branch cannot be read. */
  base_revision: string;
}

interface SandboxState {
  sandbox_id: string;
  thread_id: string;
  session_id: string | null;
  /** The harness process serving the session, by pid and start time (so a reused pid is not taken for it). */
  harness?: { pid: number; start_time: string } | null;
  repos: Record<string, RepoState>;
  /** A run found the sandbox past its bound on disk: the next one rebuilds the workspaces. */
  outgrown?: boolean;
  /** The sandbox's own uid, where the runner gives each one (uids.ts). */
  uid?: number;
}

export interface LocalSandboxOptions {
  root: string;
  logger: Logger;
  publish: SandboxStatusPublisher;
  /** A short-lived token to clone and fetch a repository of the owner's, or null when none is needed. */
  credentials?: RepositoryCredentials;
  /** Where each sandbox's own uid comes from; absent where jails run as the runner's user. */
  uids?: SandboxUids | null;
}

export const threadBranch = (threadId: string) => `threadwork/${threadId}`;

/** A thread id as one safe folder name (ids are opaque: anything odd is hashed). */
function folderName(threadId: string): string {
  return /^[A-Za-z0-9_-]{1,128}$/.test(threadId)
    ? threadId
    : `t_${createHash('sha256').update(threadId).digest('hex').slice(0, 32)}`;
}

/**
 * A folder for a repository new to the sandbox, named after it; one already taken (same name, other
 * owner) takes the owner and id too.
 */
function pickFolder(repo: RunRepository, taken: ReadonlySet<string>): string {
  const clean = (v: string) => v.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '_');
  const short = clean(repo.full_name.split('/').pop() ?? repo.full_name);
  return taken.has(short) ? `${clean(repo.full_name.replace('/', '__'))}-${repo.repository_id}` : short;
}

export class LocalSandboxProvider implements SandboxProvider {
  readonly kind = 'local';
  private readonly statuses = new Map<string, SandboxStatus>();

  constructor(private readonly options: LocalSandboxOptions) {}

  async prepare(job: RunJob, claim: SandboxClaim): Promise<Sandbox> {
    const folder = folderName(job.thread_id);
    const dir = join(this.options.root, folder);
    const take = await SandboxTake.take(dir, claim);
    const existing = await this.readState(dir);
    if (existing?.outgrown) await this.rebuild(dir, existing, take);
    const state: SandboxState = existing ?? {
      sandbox_id: `sbx_${randomBytes(16).toString('hex')}`,
      thread_id: job.thread_id,
      session_id: null,
      repos: {},
    };
    take.check();
    await this.publish(job.thread_id, state.sandbox_id, 'initializing', null, claim);
    const starts = new Map<string, string | null>();
    let owner: number | null = null;
    try {
      owner = this.options.uids ? await this.options.uids.claim(folder, state.uid) : null;
      if (owner !== null) state.uid = owner;
      await mkdir(join(dir, HARNESS_HOME), { recursive: true });
      await mkdir(join(dir, GIT_DIRS), { recursive: true });
      await mkdir(join(dir, AGENT_HOME), { recursive: true });
      if (owner !== null) await this.secure(dir, owner);
      const taken = new Set([
        HARNESS_HOME,
        STATE_FILE,
        GIT_DIRS,
        AGENT_HOME,
        TAKES,
        ...Object.values(state.repos).map((r) => r.dir),
      ]);
      for (const repo of job.repositories) {
        const known = state.repos[repo.project_repository_id];
        const repoFolder = known?.dir ?? pickFolder(repo, taken);
        taken.add(repoFolder);
        const hold = { runId: claim.run_id, claimId: claim.claim_id };
        const token = (await this.options.credentials?.(hold, repo.repository_id, repo.clone_url)) ?? null;
        const remote = { url: repo.clone_url, token };
        const prepared = await this.prepareRepo(dir, repoFolder, repo, job.thread_id, known, remote, take, owner);
        state.repos[repo.project_repository_id] = prepared.state;
        starts.set(repo.project_repository_id, prepared.start);
        // Recorded at once: a clone that is in place but not in the state would be cloned over next time.
        await this.writeState(dir, state, take);
      }
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      // Taken over meanwhile: what went wrong is the newer attempt's to find out, not to be told.
      if (err instanceof SandboxTakenError || !take.current) {
        this.options.logger.warn(
          { thread_id: job.thread_id, run_id: claim.run_id, attempt: claim.attempt, err },
          'sandbox taken by a newer attempt while this one prepared it; leaving it',
        );
        throw err instanceof SandboxTakenError ? err : new SandboxTakenError(reason, { cause: err });
      }
      await this.publish(job.thread_id, state.sandbox_id, 'failed', reason, claim);
      throw new SandboxError(`the sandbox could not be prepared: ${reason}`, { cause: err });
    }
    const sandbox = this.toSandbox(dir, state, job.repositories, starts, take, owner);
    take.check();
    await this.publish(job.thread_id, state.sandbox_id, 'ready', null, claim);
    return sandbox;
  }

  async exists(threadId: string): Promise<boolean> {
    const dir = join(this.options.root, folderName(threadId));
    const state = await this.readState(dir);
    if (!state || !existsSync(join(dir, HARNESS_HOME))) return false;
    const present = (r: RepoState) => existsSync(join(dir, r.dir)) && existsSync(gitDirOf(dir, r.dir));
    return Object.values(state.repos).every(present);
  }

  async rememberSession(sandbox: Sandbox, sessionId: string | null, harnessPid?: number): Promise<void> {
    const state = await this.readState(sandbox.dir);
    if (!state) throw new SandboxError(`sandbox ${sandbox.id} has no state file`);
    const started = harnessPid === undefined ? null : startTime(harnessPid);
    const harness = harnessPid !== undefined && started !== null ? { pid: harnessPid, start_time: started } : null;
    await this.writeState(sandbox.dir, { ...state, session_id: sessionId, harness }, sandbox.take);
  }

  async stopHarness(sandbox: Sandbox): Promise<boolean> {
    // The process recorded may be the newer attempt's, which this one must not stop.
    sandbox.take.check();
    const recorded = (await this.readState(sandbox.dir))?.harness;
    // Runners sharing this disk share a machine, so the recorded pid is one of ours to look up.
    if (!recorded || startTime(recorded.pid) !== recorded.start_time) return false;
    this.options.logger.warn(
      { thread_id: sandbox.threadId, pid: recorded.pid },
      'stopping the harness another runner left running on this sandbox',
    );
    if (!(await killTree(recorded.pid))) {
      this.options.logger.error({ thread_id: sandbox.threadId, pid: recorded.pid }, 'the old harness did not exit');
    }
    return true;
  }

  diskUsage(sandbox: Sandbox, jailPid?: number): Promise<DiskUsage> {
    return measureDisk(sandbox.dir, jailPid);
  }

  async outgrown(sandbox: Sandbox): Promise<void> {
    const state = await this.readState(sandbox.dir);
    if (!state) throw new SandboxError(`sandbox ${sandbox.id} has no state file`);
    await this.writeState(sandbox.dir, { ...state, outgrown: true }, sandbox.take);
  }

  async freeOutgrown(sandbox: Sandbox, max: DiskUsage): Promise<void> {
    const state = await this.readState(sandbox.dir);
    if (!state?.outgrown) return;
    await this.rebuild(sandbox.dir, state, sandbox.take);
    const used = await measureDisk(sandbox.dir).catch((err: unknown) => {
      if (!(err instanceof DiskMeasureError)) throw err;
      this.options.logger.warn({ thread_id: state.thread_id, err }, 'the rebuilt sandbox could not be measured');
      return null;
    });
    if (used && used.bytes <= max.bytes && used.inodes <= max.inodes) return;
    this.options.logger.warn(
      { thread_id: state.thread_id, used_bytes: used?.bytes, used_inodes: used?.inodes },
      'the harness’s home alone is past the sandbox’s bound on disk, or cannot be measured; removing it, and with it the conversation',
    );
    sandbox.take.check();
    await rm(join(sandbox.dir, HARNESS_HOME), { recursive: true, force: true });
    await mkdir(join(sandbox.dir, HARNESS_HOME), { recursive: true });
    await this.writeState(sandbox.dir, { ...state, repos: {}, session_id: null }, sandbox.take);
  }

  /**
   * Empties a sandbox that grew past its bound: its workspaces and the runner's git directories go
   * (the repositories are cloned again, on the thread branch as last pushed), and so does what the
   * agent kept in its HOME; the harness's home, with the conversation, stays.
   */
  private async rebuild(dir: string, state: SandboxState, take: SandboxFence): Promise<void> {
    this.options.logger.warn({ thread_id: state.thread_id }, 'rebuilding a sandbox that grew past its bound on disk');
    for (const repo of Object.values(state.repos)) {
      take.check();
      await rm(join(dir, repo.dir), { recursive: true, force: true });
      await rm(gitDirOf(dir, repo.dir), { recursive: true, force: true });
    }
    take.check();
    await rm(join(dir, AGENT_HOME), { recursive: true, force: true });
    state.repos = {};
    delete state.outgrown;
    await this.writeState(dir, state, take);
  }

  /**
   * Gives the sandbox's uid what the agent writes, and keeps the rest out of its reach (see the top
   * of this file). Each step leaves things as a crash halfway would find them again: a directory
   * found owned is owned whole (ensureOwned).
   */
  private async secure(dir: string, owner: number): Promise<void> {
    await chown(dir, 0, owner);
    await chmod(dir, 0o710);
    await chmod(join(dir, TAKES), 0o700);
    await chmod(join(dir, GIT_DIRS), 0o711);
    await ensureOwned(join(dir, HARNESS_HOME), owner);
    await ensureOwned(join(dir, AGENT_HOME), owner);
  }

  status(threadId: string): SandboxStatus | null {
    return this.statuses.get(threadId) ?? null;
  }

  async stop(threadId: string): Promise<void> {
    const dir = join(this.options.root, folderName(threadId));
    const state = await this.readState(dir);
    await this.publish(threadId, state?.sandbox_id ?? null, 'stopped', 'idle');
  }

  /**
   * One repository of the sandbox, ready for a run: cloned on first use (the thread branch from the
   * remote's thread branch when a sandbox elsewhere pushed one, else from the requested base),
   * refreshed later (the base fetched, the thread branch kept); then the agent's `.git` made anew.
   * Answers the state to keep and the remote's thread-branch revision now (null: none), which the
   * run's push leases against.
   */
  private async prepareRepo(
    root: string,
    folder: string,
    repo: RunRepository,
    threadId: string,
    known: RepoState | undefined,
    remote: RemoteAccess,
    take: SandboxTake,
    owner: number | null,
  ): Promise<{ state: RepoState; start: string | null }> {
    const workTree = join(root, folder);
    const gitDir = gitDirOf(root, folder);
    const branch = threadBranch(threadId);
    const baseRef = `refs/heads/${repo.branch}`;
    const threadRef = `refs/heads/${branch}`;
    const { empty, revisions } = await remoteRevisions(root, remote, [baseRef, threadRef]);
    const start = revisions.get(threadRef) ?? null;

    if (known && existsSync(workTree) && existsSync(gitDir)) {
      // Later runs continue on the thread branch; the fetch only refreshes what the diff is taken against.
      if (revisions.has(baseRef)) {
        take.check();
        try {
          await git(
            root,
            ['fetch', '--quiet', '--no-tags', '--', remote.url, `+${baseRef}:refs/remotes/origin/${repo.branch}`],
            {
              repo: { gitDir, workTree },
              remote,
            },
          );
        } catch (err) {
          this.options.logger.warn({ err, repo: repo.full_name }, 'fetch failed; continuing with the clone as it is');
        }
      }
      if (owner !== null) {
        await secureGitDir(gitDir, owner);
        await ensureOwned(workTree, owner);
      }
      await makeAgentRepo({ gitDir, workTree }, { url: repo.clone_url, baseBranch: repo.branch, branch }, take, owner);
      return { state: known, start };
    }
    if (!empty && !revisions.has(baseRef))
      throw new SandboxError(`the branch ${repo.branch} does not exist in ${repo.full_name}`);

    // Made aside and moved in place, so a clone that dies halfway leaves nothing a later run would trust.
    const suffix = randomBytes(4).toString('hex');
    const partial = { gitDir: `${gitDir}.partial-${suffix}`, workTree: join(root, `.${folder}.partial-${suffix}`) };
    try {
      take.check();
      await rm(workTree, { recursive: true, force: true });
      await rm(gitDir, { recursive: true, force: true });
      await git(root, ['init', '--quiet', '--bare', '--', partial.gitDir]);
      await mkdir(partial.workTree);
      const into = { repo: partial, remote };
      await git(root, ['config', 'core.bare', 'false'], into);
      await git(root, ['config', 'remote.origin.url', remote.url], into);
      if (!empty) {
        const refspecs = [`+${baseRef}:refs/remotes/origin/${repo.branch}`];
        if (start) refspecs.push(`+${threadRef}:refs/remotes/origin/${branch}`);
        await git(root, ['fetch', '--quiet', '--no-tags', '--', remote.url, ...refspecs], into);
        // A thread whose branch was pushed from a sandbox that is gone carries on from it.
        const from = start ? `refs/remotes/origin/${branch}` : `refs/remotes/origin/${repo.branch}`;
        await git(partial.workTree, ['checkout', '--quiet', '-B', branch, from, '--'], into);
      } else {
        // A repository with no commits yet (just created) has no branch to start from: the thread
        // branch starts from an empty tree, and its first commit is the repository's first.
        await git(root, ['symbolic-ref', 'HEAD', threadRef], into);
      }
      // The checkout is the sandbox's uid's before it is in place, and the runner's git directory its own.
      if (owner !== null) {
        await handOver([partial.workTree], owner);
        await secureGitDir(partial.gitDir, owner);
      }
      take.check();
      await rename(partial.gitDir, gitDir);
      take.check();
      await rename(partial.workTree, workTree);
    } finally {
      await rm(partial.workTree, { recursive: true, force: true });
      await rm(partial.gitDir, { recursive: true, force: true });
    }
    const theirs = { gitDir, workTree };
    const base = empty
      ? EMPTY_TREE
      : (
          await git(root, ['rev-parse', '--verify', `refs/remotes/origin/${repo.branch}^{commit}`], { repo: theirs })
        ).trim();
    await makeAgentRepo(theirs, { url: repo.clone_url, baseBranch: repo.branch, branch }, take, owner);
    return { state: { dir: folder, base_branch: repo.branch, base_revision: base }, start };
  }

  private toSandbox(
    dir: string,
    state: SandboxState,
    repositories: readonly RunRepository[],
    starts: ReadonlyMap<string, string | null>,
    take: SandboxFence,
    owner: number | null,
  ): Sandbox {
    const byId = new Map(repositories.map((r) => [r.project_repository_id, r]));
    const repos: SandboxRepo[] = Object.entries(state.repos).flatMap(([id, r]) => {
      const repo = byId.get(id);
      if (!repo) return [];
      return [
        {
          project_repository_id: id,
          repository_id: repo.repository_id,
          full_name: repo.full_name,
          dir: join(dir, r.dir),
          gitDir: gitDirOf(dir, r.dir),
          clone_url: repo.clone_url,
          start_revision: starts.get(id) ?? null,
          base_branch: repo.branch,
          branch: threadBranch(state.thread_id),
          recorded_base: r.base_revision,
        },
      ];
    });
    const harnessHome = join(dir, HARNESS_HOME);
    const home = join(dir, AGENT_HOME);
    return {
      id: state.sandbox_id,
      threadId: state.thread_id,
      dir,
      cwd: repos.length === 1 && repos[0] ? repos[0].dir : dir,
      harnessHome,
      env: {
        PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
        HOME: home,
        CODEX_HOME: harnessHome,
        LANG: process.env.LANG ?? 'C.UTF-8',
      },
      repos,
      mounts: {
        writable: [...repos.map((r) => r.dir), harnessHome, home],
        readable: repos.map((r) => join(r.gitDir, 'objects')),
      },
      owner,
      sessionId: state.session_id,
      take,
    };
  }

  private async readState(dir: string): Promise<SandboxState | null> {
    try {
      return JSON.parse(await readFile(join(dir, STATE_FILE), 'utf8')) as SandboxState;
    } catch {
      return null;
    }
  }

  private async writeState(dir: string, state: SandboxState, take: SandboxFence): Promise<void> {
    const tmp = join(dir, `.${STATE_FILE}.${randomBytes(4).toString('hex')}`);
    await writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
    try {
      take.check();
      await rename(tmp, join(dir, STATE_FILE));
    } finally {
      await rm(tmp, { force: true });
    }
  }

  private async publish(
    threadId: string,
    sandboxId: string | null,
    status: SandboxStatus,
    reason: string | null,
    claim: SandboxClaim | null = null,
  ) {
    this.statuses.set(threadId, status);
    await this.options.publish(threadId, sandboxId, status, reason, claim);
  }
}

/** Git's id of the empty tree: the base a thread diffs against in a repository with no commits. */
export const EMPTY_TREE = '4b825dc642cb6eb9a060e54bf8d69288fbee4904';

/** The runner's git directory of a workspace folder. */
function gitDirOf(root: string, folder: string): string {
  return join(root, GIT_DIRS, `${folder}.git`);
}
