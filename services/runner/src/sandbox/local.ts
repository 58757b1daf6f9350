import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { RunJob, RunRepository, SandboxStatus } from '@threadwork/contracts';
import type { Logger } from '@threadwork/platform';
import { newSandboxId } from '../domain/ids.js';
import { killTree, startTime } from '../harness/processes.js';
import { DiskMeasureError, measureDisk, type DiskUsage } from './disk.js';
import {
  AGENT_HOME,
  folderName,
  GIT_DIRS,
  gitDirOf,
  HARNESS_HOME,
  pickFolder,
  readState,
  STATE_FILE,
  TAKES,
  threadBranch,
  writeState,
  type RepoState,
  type SandboxState,
} from './local-state.js';
import { prepareRepo } from './local-workspace.js';
import { SandboxTake, SandboxTakenError, type SandboxClaim } from './take.js';
import { ensureOwned, type SandboxUids } from './uids.js';
import {
  SandboxError,
  type Sandbox,
  type SandboxProvider,
  type SandboxRepo,
  type RepositoryCredentials,
  type SandboxStatusPublisher,
  type SandboxFence,
  type StoredSession,
} from './provider.js';

// The `local` provider: a sandbox is a folder of the runner's disk (its layout: local-state.ts),
// prepared for each run (its workspaces: local-workspace.ts), remembered across runner processes,
// rebuilt when it outgrows its bound on disk.

export interface LocalSandboxOptions {
  root: string;
  logger: Logger;
  publish: SandboxStatusPublisher;
  /** A short-lived token to clone and fetch a repository of the owner's, or null when none is needed. */
  credentials?: RepositoryCredentials;
  /** Where each sandbox's own uid comes from; absent where jails run as the runner's user. */
  uids?: SandboxUids | null;
}

export class LocalSandboxProvider implements SandboxProvider {
  readonly kind = 'local';
  private readonly statuses = new Map<string, SandboxStatus>();

  constructor(private readonly options: LocalSandboxOptions) {}

  async prepare(job: RunJob, claim: SandboxClaim): Promise<Sandbox> {
    const folder = folderName(job.thread_id);
    const dir = join(this.options.root, folder);
    const take = await SandboxTake.take(dir, claim);
    const existing = await readState(dir);
    if (existing?.outgrown) await this.rebuild(dir, existing, take);
    const state: SandboxState = existing ?? {
      sandbox_id: newSandboxId(),
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
        const prepared = await prepareRepo({
          root: dir,
          folder: repoFolder,
          repo,
          threadId: job.thread_id,
          known,
          remote,
          take,
          owner,
          logger: this.options.logger,
        });
        state.repos[repo.project_repository_id] = prepared.state;
        starts.set(repo.project_repository_id, prepared.start);
        // Recorded at once: a clone that is in place but not in the state would be cloned over next time.
        await writeState(dir, state, take);
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
    const state = await readState(dir);
    if (!state || !existsSync(join(dir, HARNESS_HOME))) return false;
    const present = (r: RepoState) => existsSync(join(dir, r.dir)) && existsSync(gitDirOf(dir, r.dir));
    return Object.values(state.repos).every(present);
  }

  async rememberSession(sandbox: Sandbox, session: StoredSession | null, harnessPid?: number): Promise<void> {
    const state = await readState(sandbox.dir);
    if (!state) throw new SandboxError(`sandbox ${sandbox.id} has no state file`);
    const started = harnessPid === undefined ? null : startTime(harnessPid);
    const harness = harnessPid !== undefined && started !== null ? { pid: harnessPid, start_time: started } : null;
    await writeState(
      sandbox.dir,
      { ...state, session_id: session?.id ?? null, session_harness: session?.harness ?? null, harness },
      sandbox.take,
    );
  }

  async stopHarness(sandbox: Sandbox): Promise<boolean> {
    // The process recorded may be the newer attempt's, which this one must not stop.
    sandbox.take.check();
    const recorded = (await readState(sandbox.dir))?.harness;
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
    const state = await readState(sandbox.dir);
    if (!state) throw new SandboxError(`sandbox ${sandbox.id} has no state file`);
    await writeState(sandbox.dir, { ...state, outgrown: true }, sandbox.take);
  }

  async freeOutgrown(sandbox: Sandbox, max: DiskUsage): Promise<void> {
    const state = await readState(sandbox.dir);
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
    await writeState(sandbox.dir, { ...state, repos: {}, session_id: null, session_harness: null }, sandbox.take);
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
    await writeState(dir, state, take);
  }

  /**
   * Gives the sandbox's uid what the agent writes, and keeps the rest out of its reach (the top of
   * local-state.ts). Each step leaves things as a crash halfway would find them again: a directory
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
    const state = await readState(dir);
    await this.publish(threadId, state?.sandbox_id ?? null, 'stopped', 'idle');
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
      // State written before there were two harnesses holds a Codex session.
      sessionHarness: state.session_id ? (state.session_harness ?? 'codex') : null,
      take,
    };
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
