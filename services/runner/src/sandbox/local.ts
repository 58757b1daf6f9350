import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import {
  chmod,
  chown,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { RunJob, RunRepository, SandboxStatus } from '@threadwork/contracts';
import { OneAtATime, type Logger } from '@threadwork/platform';
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
import { git, remoteRevisions, type RemoteSeen } from './git.js';
import { agentRepoFingerprint, buildAgentRepo, placeAgentRepo, renameAgentBranch } from './agent-repo.js';
import { prepareRepo } from './local-workspace.js';
import { RepositoryMirrors } from './mirrors.js';
import { SandboxTake, SandboxTakenError, type SandboxClaim } from './take.js';
import { ensureOwned, handOver, type SandboxUids } from './uids.js';
import {
  SandboxError,
  type Sandbox,
  type SandboxProvider,
  type SandboxRepo,
  type RepositoryCredentials,
  type SandboxStatusPublisher,
  type SandboxFence,
  type SpareSandbox,
  type SpareSource,
  type StoredSession,
  type WarmHarness,
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
  private readonly mirrors: RepositoryMirrors;
  /** The take under which this runner last said a thread's sandbox `ready` (and nothing since). */
  private readonly saidReady = new Map<string, string>();
  /** Changes of each sandbox's state, by folder, one after the other (changeState). */
  private readonly stateChanges = new OneAtATime();
  private spares: SpareSource | null = null;

  constructor(private readonly options: LocalSandboxOptions) {
    this.mirrors = new RepositoryMirrors(options.root, options.logger);
  }

  /**
   * The thread's sandbox folder: `<root>/<thread>`, or the spare's folder that link names when the
   * thread adopted a spare. Resolved, so every path of the sandbox is the one its jails were given.
   */
  private async dirOf(threadId: string): Promise<string> {
    const path = join(this.options.root, folderName(threadId));
    const stat = await lstat(path).catch(() => null);
    if (!stat?.isSymbolicLink()) return path;
    const target = await readlink(path);
    if (!SPARE_FOLDER.test(target)) throw new SandboxError(`the sandbox of ${threadId} links to ${target}`);
    return join(this.options.root, target);
  }

  /**
   * Makes a new thread's sandbox of a spare made for the same repositories and harness: the spare's
   * folder becomes the thread's (a link from the thread's name, made exclusively), with the harness
   * that already runs in it. Only while the remote still shows the bases the spare was cloned at and
   * no thread branch (a thread that has one carries on from it, elsewhere made); the run's own token
   * asks. Null, the spare gone, when it cannot be. With the harness come the repositories made
   * ready with it (project repository ids): each at the base the remote has, with no thread branch
   * there to start from, and the agent's repository, made with the spare, moved in on the thread
   * branch. The run has nothing left to do to them before its turn.
   */
  private async adopt(
    job: RunJob,
    claim: SandboxClaim,
    link: string,
    tokens: RepositoryTokens,
  ): Promise<Adopted | null> {
    const taken = await this.spares?.take(job);
    if (!taken) return null;
    const { spare } = taken;
    const log = this.options.logger.child({ thread_id: job.thread_id, run_id: claim.run_id, spare: spare.folder });
    const ready = new Set<string>();
    try {
      // An attempt that no longer holds its run spends no spare (the take after this one says so too):
      // asked beside the remote, and known before the spare is changed.
      const holds = claim.holds();
      holds.catch(() => undefined);
      const state = await readState(spare.dir);
      if (!state) throw new SandboxError('the spare has no state');
      const branch = threadBranch(job.thread_id);
      for (const repo of job.repositories) {
        const seen = await tokens.look(repo);
        if (seen.revisions.has(`refs/heads/${branch}`))
          return await this.decline(taken, log, 'the thread has a branch');
        const base = seen.revisions.get(`refs/heads/${repo.branch}`);
        if (!base || base !== spare.bases.get(repo.project_repository_id)) {
          return await this.decline(taken, log, 'the base has moved since the spare was made');
        }
      }
      if (!(await holds)) return await this.decline(taken, log, 'the attempt no longer holds its run');
      // Still the spare's alone: named for the thread before anything can find it under the thread's
      // name. Git renames the runner's branch, which checks the name, before the agent's repository,
      // renamed aside, is moved in.
      const own = { check() {}, current: true };
      for (const [id, repo] of Object.entries(state.repos)) {
        const gitRepo = { gitDir: gitDirOf(spare.dir, repo.dir), workTree: join(spare.dir, repo.dir) };
        const aside = spare.agentRepos.get(id);
        if (aside) await renameAgentBranch(aside, threadBranch(spare.folder), branch);
        await Promise.all([
          git(spare.dir, ['branch', '-m', threadBranch(spare.folder), branch], { repo: gitRepo }),
          aside && spare.session.owner !== null ? handOver([aside], spare.session.owner) : undefined,
        ]);
        if (!aside) continue;
        await placeAgentRepo(aside, gitRepo, own, null);
        ready.add(id);
      }
      await writeState(spare.dir, { ...state, thread_id: job.thread_id }, own);
      try {
        await symlink(spare.folder, link);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST')
          return await this.decline(taken, log, 'the thread has a sandbox');
        throw err;
      }
    } catch (err) {
      log.warn({ err }, 'the spare sandbox could not be adopted; preparing the sandbox anew');
      await this.spares?.discard(taken);
      return null;
    }
    // The thread's from here on, whatever happens next: a link names it, and it is never removed as a spare.
    log.info('new thread’s sandbox adopted from a spare, its harness already started');
    await rm(join(spare.dir, SPARE_FILE), { force: true }).catch((err: unknown) =>
      log.warn({ err }, 'the adopted sandbox’s spare record could not be removed'),
    );
    return { warm: taken.warm, folder: spare.folder, ready };
  }

  private async decline(taken: { spare: SpareSandbox; warm: WarmHarness }, log: Logger, why: string): Promise<null> {
    log.info({ why }, 'spare sandbox not adopted');
    await this.spares?.discard(taken);
    return null;
  }

  /**
   * A sandbox made ahead of any thread for `repositories`, cloned from the runner's mirrors (no
   * remote, no token); null when a mirror lacks a base. Its folder (`sandbox.<hex>`, a name no
   * thread's folder has) records the runner process that made it, so one left by a runner that died
   * is removed (`sweepSpares`).
   */
  async makeSpare(repositories: readonly RunRepository[]): Promise<SpareSandbox | null> {
    const folder = `sandbox.${randomBytes(12).toString('hex')}`;
    const dir = join(this.options.root, folder);
    const own = { check() {}, current: true };
    // Made aside with the record of its maker and moved in place: a spare folder always has one.
    const aside = join(this.options.root, `.${folder}`);
    await mkdir(aside);
    try {
      const maker = { pid: process.pid, start_time: startTime(process.pid) };
      await writeFile(join(aside, SPARE_FILE), `${JSON.stringify(maker)}\n`);
      await rename(aside, dir);
    } finally {
      await rm(aside, { recursive: true, force: true });
    }
    let owner: number | null = null;
    try {
      const state: SandboxState = { sandbox_id: newSandboxId(), thread_id: '', session_id: null, repos: {} };
      owner = this.options.uids ? await this.options.uids.claim(folder, undefined) : null;
      // Recorded at once, so a sweep after a crash frees it.
      if (owner !== null) state.uid = owner;
      await writeState(dir, state, own);
      for (const sub of [HARNESS_HOME, GIT_DIRS, AGENT_HOME, TAKES]) await mkdir(join(dir, sub));
      if (owner !== null) await this.secure(dir, owner);
      const taken = new Set([HARNESS_HOME, STATE_FILE, GIT_DIRS, AGENT_HOME, TAKES, SPARE_FILE]);
      const bases = new Map<string, string>();
      const agentRepos = new Map<string, string>();
      for (const repo of repositories) {
        if ((await this.mirrors.revision(repo, repo.branch)) === null) {
          await this.dropSpare(folder, owner);
          return null;
        }
        const repoFolder = pickFolder(repo, taken);
        taken.add(repoFolder);
        const prepared = await prepareRepo({
          root: dir,
          folder: repoFolder,
          repo,
          threadId: folder,
          known: undefined,
          remote: this.mirrors.remote(repo),
          take: own,
          owner,
          logger: this.options.logger,
          agentRepo: false,
        });
        state.repos[repo.project_repository_id] = prepared.state;
        bases.set(repo.project_repository_id, prepared.state.base_revision);
        await this.mirrors.used(repo);
        // What the adopting thread's run would otherwise do on its way to its turn: the remote's URL
        // in place of the mirror's, and the agent's repository, made aside on the spare's branch.
        const runnerRepo = { gitDir: gitDirOf(dir, repoFolder), workTree: join(dir, repoFolder) };
        await git(dir, ['config', 'remote.origin.url', repo.clone_url], { repo: runnerRepo });
        const aside = join(dirname(runnerRepo.gitDir), `${SPARE_AGENT_REPO}${repoFolder}`);
        const shape = { url: repo.clone_url, baseBranch: repo.branch, branch: threadBranch(folder) };
        await buildAgentRepo(runnerRepo, shape, aside);
        agentRepos.set(repo.project_repository_id, aside);
      }
      await writeState(dir, state, own);
      const sandbox = this.toSandbox(dir, state, repositories, new Map(), own, owner);
      return {
        folder,
        dir,
        bases,
        agentRepos,
        session: {
          cwd: sandbox.cwd,
          home: sandbox.harnessHome,
          env: sandbox.env,
          mounts: sandbox.mounts,
          owner,
        },
      };
    } catch (err) {
      await this.dropSpare(folder, owner);
      throw err;
    }
  }

  /** Removes a spare that no thread adopted, once nothing of its harness runs. */
  async dropSpare(folder: string, owner: number | null): Promise<void> {
    if (!SPARE_FOLDER.test(folder)) throw new SandboxError(`${folder} is not a spare sandbox`);
    await rm(join(this.options.root, folder), { recursive: true, force: true });
    if (owner !== null) await this.options.uids?.release(owner, folder);
  }

  /**
   * Removes the spares runner processes that are gone left behind (their harness went with them:
   * setpriv's death signal), and never those a thread adopted (a link names them).
   */
  async sweepSpares(): Promise<number> {
    const root = this.options.root;
    const names = await readdir(root).catch(() => [] as string[]);
    const adopted = new Set<string>();
    for (const name of names) {
      const stat = await lstat(join(root, name)).catch(() => null);
      if (stat?.isSymbolicLink()) adopted.add(await readlink(join(root, name)));
    }
    let removed = 0;
    for (const name of names) {
      // One made aside by a runner that died before moving it in place.
      if (SPARE_ASIDE.test(name) && (await madeByTheDead(join(root, name)))) {
        await rm(join(root, name), { recursive: true, force: true });
        continue;
      }
      if (!SPARE_FOLDER.test(name) || adopted.has(name)) continue;
      if (!(await madeByTheDead(join(root, name)))) continue;
      const state = await readState(join(root, name));
      await this.dropSpare(name, state?.uid ?? null);
      removed++;
    }
    return removed;
  }

  /** Removes the repository mirrors no sandbox was cloned from or updated them for `idleMs` (mirrors.ts). */
  sweepMirrors(idleMs: number): Promise<number> {
    return this.mirrors.sweep(idleMs);
  }

  /** Resolves once the mirrors' updates under way are done (the runner stops). */
  idle(): Promise<void> {
    return this.mirrors.idle();
  }

  /** Spare sandboxes with their harness started, which a new thread's sandbox is adopted from. */
  useSpares(spares: SpareSource): void {
    this.spares = spares;
  }

  async prepare(job: RunJob, claim: SandboxClaim): Promise<Sandbox> {
    const tokens = new RepositoryTokens(claim, this.options.credentials, this.options.root, job.thread_id);
    // Asked of repohost and the remote at once, beside the take and the adoption, which need the answers later.
    for (const repo of job.repositories) tokens.look(repo).catch(() => undefined);
    const link = join(this.options.root, folderName(job.thread_id));
    const adopted = this.spares && !(await present(link)) ? await this.adopt(job, claim, link, tokens) : null;
    try {
      const sandbox = await this.prepareIn(job, claim, tokens, adopted);
      if (adopted) sandbox.warm = adopted.warm;
      return sandbox;
    } catch (err) {
      // The thread's sandbox was adopted, but this attempt does not go on in it.
      await adopted?.warm.session.stop();
      throw err;
    }
  }

  private async prepareIn(
    job: RunJob,
    claim: SandboxClaim,
    tokens: RepositoryTokens,
    adopted: Adopted | null,
  ): Promise<Sandbox> {
    const take = await SandboxTake.take(await this.dirOf(job.thread_id), claim);
    // Resolved again once taken: another runner's attempt may have linked the thread to a spare meanwhile.
    const dir = await this.dirOf(job.thread_id);
    const folder = basename(dir);
    // The adopted spare as adoption left it: no other attempt's take (so no turn) came in between.
    const adoptedReady = adopted?.folder === folder && take.replaced.size === 0 ? adopted.ready : undefined;
    const existing = await readState(dir);
    // Said `ready` by this runner for the last take, and taken by nobody else since: it stays `ready`
    // through this run's refresh of the repositories it has, with nothing to say of it (`failed`
    // is still said).
    const readyTake = this.saidReady.get(job.thread_id);
    const stillReady =
      existing !== null &&
      !existing.outgrown &&
      readyTake !== undefined &&
      take.replaced.has(readyTake) &&
      job.repositories.every((r) => existing.repos[r.project_repository_id] !== undefined);
    if (existing?.outgrown) await this.rebuild(dir, existing, take);
    const state: SandboxState = existing ?? {
      sandbox_id: newSandboxId(),
      thread_id: job.thread_id,
      session_id: null,
      repos: {},
    };
    take.check();
    // Said while the repositories are made ready, not before: `ready` (or `failed`) waits for it.
    // Not of an adopted spare's, which is ready already: its thread's sandbox goes straight to `ready`.
    const adoptedWhole =
      adoptedReady !== undefined && job.repositories.every((r) => adoptedReady.has(r.project_repository_id));
    const initializing =
      stillReady || adoptedWhole
        ? Promise.resolve()
        : this.publish(job.thread_id, state.sandbox_id, 'initializing', null, claim);
    initializing.catch(() => undefined);
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
        const seen = await tokens.look(repo);
        const remote = { url: repo.clone_url, token: await tokens.get(repo) };
        // Made ready with the adopted spare (adopt): nothing is left to do to it.
        const prepared =
          known && adoptedReady?.has(repo.project_repository_id)
            ? { state: known, start: null, fetched: false }
            : await prepareRepo({
                root: dir,
                folder: repoFolder,
                repo,
                threadId: job.thread_id,
                known,
                remote,
                take,
                owner,
                logger: this.options.logger,
                seen,
                seed: this.mirrors.remote(repo),
                // Made after the last turn, and no take (so no turn) came between that one and this.
                agentRepoAtRest:
                  known?.agent_at_rest && take.replaced.has(known.agent_at_rest.take)
                    ? known.agent_at_rest.fingerprint
                    : undefined,
              });
        // Beside the run, not before it: the mirror is for the sandboxes made after this one.
        if (prepared.fetched) {
          void this.mirrors.update(repo, gitDirOf(dir, prepared.state.dir), repo.branch);
        }
        // The turn ahead may change the agent's repository: it is at rest no more.
        const { agent_at_rest: _atRest, ...repoState } = prepared.state;
        state.repos[repo.project_repository_id] = repoState;
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
      await initializing;
      await this.publish(job.thread_id, state.sandbox_id, 'failed', reason, claim);
      throw new SandboxError(`the sandbox could not be prepared: ${reason}`, { cause: err });
    }
    const sandbox = this.toSandbox(dir, state, job.repositories, starts, take, owner);
    sandbox.agentRepoAtRest = (repo) => this.agentRepoAtRest(dir, repo, take);
    take.check();
    if (stillReady) {
      this.saidReady.set(job.thread_id, take.name);
    } else {
      await initializing;
      if (await this.publish(job.thread_id, state.sandbox_id, 'ready', null, claim)) {
        this.saidReady.set(job.thread_id, take.name);
      }
    }
    return sandbox;
  }

  /** Records that the run of `take` made the agent's repository of `repo` anew after its turn (RepoState.agent_at_rest). */
  private async agentRepoAtRest(dir: string, repo: SandboxRepo, take: SandboxTake): Promise<void> {
    take.check();
    const fingerprint = await agentRepoFingerprint(repo.dir);
    if (fingerprint === null) return;
    await this.changeState(dir, take, (state) => {
      const known = state.repos[repo.project_repository_id];
      if (known) known.agent_at_rest = { take: take.name, fingerprint };
    });
  }

  /**
   * Reads the state of the sandbox at `dir`, changes it and writes it back, one change of a
   * sandbox's state after the other (a disk check may find the sandbox outgrown while its run
   * reports): none is lost to another's write of what it read before.
   */
  private changeState(dir: string, take: SandboxFence, change: (state: SandboxState) => void): Promise<void> {
    return this.stateChanges.run(dir, async () => {
      const state = await readState(dir);
      if (!state) throw new SandboxError(`the sandbox at ${dir} has no state file`);
      change(state);
      await writeState(dir, state, take);
    });
  }

  async exists(threadId: string): Promise<boolean> {
    const dir = await this.dirOf(threadId);
    const state = await readState(dir);
    if (!state || !existsSync(join(dir, HARNESS_HOME))) return false;
    const present = (r: RepoState) => existsSync(join(dir, r.dir)) && existsSync(gitDirOf(dir, r.dir));
    return Object.values(state.repos).every(present);
  }

  async rememberSession(sandbox: Sandbox, session: StoredSession | null, harnessPid?: number): Promise<void> {
    const started = harnessPid === undefined ? null : startTime(harnessPid);
    const harness = harnessPid !== undefined && started !== null ? { pid: harnessPid, start_time: started } : null;
    await this.changeState(sandbox.dir, sandbox.take, (state) => {
      state.session_id = session?.id ?? null;
      state.session_harness = session?.harness ?? null;
      state.harness = harness;
    });
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
    await this.changeState(sandbox.dir, sandbox.take, (state) => {
      state.outgrown = true;
    });
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
    const dir = await this.dirOf(threadId);
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

  /** Says the status; answers whether it was said (a lost one is said again by the next). */
  private async publish(
    threadId: string,
    sandboxId: string | null,
    status: SandboxStatus,
    reason: string | null,
    claim: SandboxClaim | null = null,
  ): Promise<boolean> {
    this.statuses.set(threadId, status);
    if (status !== 'ready') this.saidReady.delete(threadId);
    return this.options.publish(threadId, sandboxId, status, reason, claim);
  }
}

/** A spare sandbox a new thread adopted (LocalSandboxProvider.adopt). */
interface Adopted {
  warm: WarmHarness;
  folder: string;
  /** Its repositories (project repository ids) the run has nothing left to do to before its turn. */
  ready: ReadonlySet<string>;
}

/** The folder of a spare sandbox (a name no thread's folder has: folderName never makes a dot). */
const SPARE_FOLDER = /^sandbox\.[0-9a-f]{24}$/;
/** In a spare's folder until a thread adopts it: the runner process that made it. */
const SPARE_FILE = 'spare.json';
/** The start of the name of a spare's agent repository made aside, beside the runner's git directories. */
const SPARE_AGENT_REPO = '.agent-git-spare-';

/** A spare folder on its way in place (makeSpare). */
const SPARE_ASIDE = /^\.sandbox\.[0-9a-f]{24}$/;

/** Whether the spare at `dir` was made by a runner process that is gone (false when it cannot be told). */
async function madeByTheDead(dir: string): Promise<boolean> {
  const maker = await readFile(join(dir, SPARE_FILE), 'utf8')
    .then((text) => JSON.parse(text) as { pid: number; start_time: string | null })
    .catch(() => null);
  return maker !== null && startTime(maker.pid) !== maker.start_time;
}

async function present(path: string): Promise<boolean> {
  return (await lstat(path).catch(() => null)) !== null;
}

/**
 * How long a token asked while the sandbox is prepared is used for: repohost may hand out one with
 * a quarter of an hour left, and a large repository's clone takes time.
 */
const TOKEN_REUSE_MS = 5 * 60_000;

/**
 * The run's tokens for its repositories, each asked of repohost once while the sandbox is prepared,
 * and what `ls-remote` with them answered of the base and the thread branch.
 */
class RepositoryTokens {
  private readonly tokens = new Map<number, { token: Promise<string | null>; at: number }>();
  private readonly seen = new Map<string, Promise<RemoteSeen>>();

  constructor(
    private readonly claim: SandboxClaim,
    private readonly credentials: RepositoryCredentials | undefined,
    /** Where `ls-remote` runs: the sandboxes' root, which exists before the thread's sandbox does. */
    private readonly cwd: string,
    private readonly threadId: string,
  ) {}

  /** The run's token for `repo`: asked once, and again when the one asked is TOKEN_REUSE_MS old (a long clone came between). */
  get(repo: RunRepository): Promise<string | null> {
    const asked = this.tokens.get(repo.repository_id);
    if (asked && Date.now() - asked.at < TOKEN_REUSE_MS) return asked.token;
    const hold = { runId: this.claim.run_id, claimId: this.claim.claim_id };
    const token =
      this.credentials?.(hold, repo.repository_id, repo.clone_url).then((t) => t ?? null) ?? Promise.resolve(null);
    this.tokens.set(repo.repository_id, { token, at: Date.now() });
    return token;
  }

  /** The remote's base and thread branch of `repo`, asked once. */
  look(repo: RunRepository): Promise<RemoteSeen> {
    let seen = this.seen.get(repo.project_repository_id);
    if (!seen) {
      const refs = [`refs/heads/${repo.branch}`, `refs/heads/${threadBranch(this.threadId)}`];
      seen = this.get(repo).then((token) => remoteRevisions(this.cwd, { url: repo.clone_url, token }, refs));
      this.seen.set(repo.project_repository_id, seen);
    }
    return seen;
  }
}
