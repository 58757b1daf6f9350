import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { posix } from 'node:path';
import { Writable } from 'node:stream';
import type { RunJob, RunRepository, SandboxStatus } from '@threadwork/contracts';
import type { HarnessHost } from '../../harness/host.js';
import type { Logger } from '@threadwork/platform';
import { newSandboxId } from '../../domain/ids.js';
import { revision } from '../agent-repo.js';
import { runnerRepo } from '../candidate.js';
import { DiskMeasureError, type DiskUsage } from '../disk.js';
import { git, type GitRepo } from '../git.js';
import {
  EMPTY_TREE,
  folderName,
  GIT_DIRS,
  gitDirOf,
  pickFolder,
  readState,
  STATE_FILE,
  TAKES,
  threadBranch,
  writeState,
  type RepoState,
  type SandboxState,
} from '../local-state.js';
import { prepareRepo } from '../local-workspace.js';
import {
  SandboxError,
  type RepositoryCredentials,
  type Sandbox,
  type SandboxFence,
  type SandboxProvider,
  type SandboxRepo,
  type SandboxStatusPublisher,
  type StoredSession,
} from '../provider.js';
import { SandboxTake, SandboxTakenError, type SandboxClaim } from '../take.js';
import { receiveTree, sendBranch, type TreeBounds } from './bundle.js';
import { BUNDLE_TIMEOUT_MS, deadline, SCRIPT_TIMEOUT_MS } from './deadline.js';
import type { PodExec } from './exec.js';
import type { SandboxPod } from './pods.js';
import type { PodState } from './status.js';
import { HOME_FOLDER, WORKSPACE } from './spec.js';

// The `kubernetes` provider: a thread's sandbox is a pod with a volume (pods.ts), where the harness
// and the agent run; the runner keeps, on its own disk under `root`, what the agent must not reach:
// the sandbox's state file and takes (as the `local` provider keeps them: local-state.ts, take.ts),
// its git directory of each repository and a copy of each workspace, which only the runner writes.
//
// The runner does every network git operation in its own git directory, exactly as `local` does
// (local-workspace.ts), then puts the thread branch into the pod's repository as a bundle over exec
// (bundle.ts). After a run the agent's work tree comes out as a bundle too, bounded and checked, and
// only its tree is taken: it is checked out over the runner's copy, which the runner commits
// (candidate.ts) and puts back into the pod. Nothing the pod says is trusted: not its files (the
// runner's git reads them as objects, never follows a link), not its repository (made anew each
// time), not its processes (the harness's pid is checked against its recorded start), not its
// answers to a measurement (parsed strictly, bounded).
//
// In the pod: `<workspace>/<folder>` per repository, `<workspace>/.harness` (the harness's home),
// `<workspace>/home` (the agent's HOME, as the pod spec sets it). On the runner:
// `<root>/<thread>/threadwork.json`, `takes/`, `git/<folder>.git` and `<folder>` (the copy).
//
// Runners do not share a disk here: the take on `root` orders the attempts of this runner. A thread
// taken over by another runner gets its pod replaced (pods.ts), and every exec into the pod is
// preceded by a look at whether the pod is still this runner's (`isOwn`); the watch behind that look
// lags the API server, which leaves a window in which the old runner's exec reaches the new pod.

/** The harness's home, a folder of the workspace volume (so sessions outlive the pod). */
const HARNESS_FOLDER = '.harness';
/** Where the runner's ref of what it takes out of the pod goes, before it is checked out. */
const COLLECTED_REF = 'refs/threadwork/collected';
/** A workspace's bundle out of the pod larger than this is refused (SandboxRepo `collect`). */
export const DEFAULT_COLLECT_MAX_BYTES = 512 * 1024 * 1024;
/** What a measurement or a look at a process may print; anything longer is not what was asked for. */
const ANSWER_MAX_BYTES = 4 * 1024;
/** PATH in the pod: the image's, not the runner's. */
const POD_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The part of the pod lifecycle the provider uses (SandboxPods). */
export interface PodLifecycle {
  /** The thread's pod, made if missing and Ready; no longer idle. */
  ensure(threadId: string): Promise<SandboxPod>;
  /** Whether the thread's pod is still this runner's (not deleted, not replaced by another runner's). */
  isOwn(threadId: string): boolean;
  /** The sandbox's status as its pod shows it; null when this runner never saw one. */
  status(threadId: string): SandboxStatus | null;
  /** Deletes the thread's pod, keeping its volume; `now`: with no grace period. */
  stopPod(threadId: string, opts?: { now?: boolean }): Promise<void>;
}

export interface KubernetesSandboxOptions {
  pods: PodLifecycle;
  /** How a command runs in the pod: kubeExec in production. */
  exec: (pod: SandboxPod) => PodExec;
  /** The runner's own folder for the sandboxes' state, git directories and workspace copies. */
  root: string;
  /** Where the workspace volume is mounted in the pod (the pod spec's WORKSPACE). */
  workspace?: string;
  logger: Logger;
  publish: SandboxStatusPublisher;
  /** A short-lived token to clone and fetch a repository of the owner's, or null when none is needed. */
  credentials?: RepositoryCredentials;
  /** Bound of a workspace's bundle taken out of the pod. */
  collectMaxBytes?: number;
  /**
   * Bounds of the tree in that bundle, as checked out over the runner's copy (the sandbox's own
   * bounds on disk, SANDBOX_DISK_MAX_BYTES and SANDBOX_DISK_MAX_INODES): a bundle is bounded
   * compressed, and what the agent makes git in the pod put into it may expand far past that.
   */
  collectTree?: Partial<TreeBounds>;
  /** How long moving a bundle in or out of the pod may take (BUNDLE_TIMEOUT_MS by default). */
  bundleTimeoutMs?: number;
  /** How long any other command in the pod may take (SCRIPT_TIMEOUT_MS by default). */
  scriptTimeoutMs?: number;
  /**
   * Where the sandbox's harness runs: in its pod, over `exec` (process.ts). `compromised` is for the
   * host to call when the agent's processes in the pod could not be made sure to be gone: the pod
   * is deleted.
   */
  host?: (exec: PodExec, compromised: (reason: string) => Promise<void>) => HarnessHost;
}

export class KubernetesSandboxProvider implements SandboxProvider {
  readonly kind = 'kubernetes';
  private readonly statuses = new Map<string, SandboxStatus>();
  private readonly workspace: string;
  /** The pod of each sandbox prepared by this process: what exec addresses. */
  private readonly podsByThread = new Map<string, SandboxPod>();

  constructor(private readonly options: KubernetesSandboxOptions) {
    this.workspace = options.workspace ?? WORKSPACE;
    if (!posix.isAbsolute(this.workspace)) throw new SandboxError('the pod workspace must be an absolute path');
  }

  async prepare(job: RunJob, claim: SandboxClaim): Promise<Sandbox> {
    const dir = this.localDir(job.thread_id);
    const take = await SandboxTake.take(dir, claim);
    const existing = await readState(dir);
    const state: SandboxState = existing ?? {
      sandbox_id: newSandboxId(),
      thread_id: job.thread_id,
      session_id: null,
      repos: {},
    };
    take.check();
    await this.publish(job.thread_id, state.sandbox_id, 'initializing', null, claim);
    const starts = new Map<string, string | null>();
    try {
      const pod = await this.options.pods.ensure(job.thread_id);
      this.podsByThread.set(job.thread_id, pod);
      if (state.outgrown) await this.rebuild(dir, state, take);
      await this.inPod(
        job.thread_id,
        take,
        ['mkdir', '-p', '--', this.harnessHome(), this.home()],
        'making the sandbox’s folders',
      );
      const taken = new Set([
        STATE_FILE,
        GIT_DIRS,
        TAKES,
        HOME_FOLDER,
        ...Object.values(state.repos).map((r) => r.dir),
      ]);
      for (const repo of job.repositories) {
        const known = state.repos[repo.project_repository_id];
        const folder = known?.dir ?? pickFolder(repo, taken);
        taken.add(folder);
        const copy: GitRepo = { gitDir: gitDirOf(dir, folder), workTree: join(dir, folder) };
        // A workspace continued keeps the agent's files in the pod (a lost attempt's edits, for the
        // attempt that takes its turn over); a new clone writes the branch's files over whatever is there.
        const continued = known !== undefined && existsSync(copy.workTree!) && existsSync(copy.gitDir);
        const hold = { runId: claim.run_id, claimId: claim.claim_id };
        const token = (await this.options.credentials?.(hold, repo.repository_id, repo.clone_url)) ?? null;
        const prepared = await prepareRepo({
          root: dir,
          folder,
          repo,
          threadId: job.thread_id,
          known,
          remote: { url: repo.clone_url, token },
          take,
          owner: null,
          logger: this.options.logger,
          agentRepo: false,
        });
        state.repos[repo.project_repository_id] = prepared.state;
        starts.set(repo.project_repository_id, prepared.start);
        await writeState(dir, state, take);
        this.checkPod(job.thread_id, take);
        await sendBranch(this.exec(job.thread_id), {
          repo: copy,
          branch: threadBranch(job.thread_id),
          podRepo: this.podPath(folder),
          files: continued ? 'index' : 'checkout',
          timeoutMs: this.bundleTimeoutMs(),
        });
      }
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
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
    const sandbox = this.toSandbox(state, job.repositories, starts, take);
    take.check();
    await this.publish(job.thread_id, state.sandbox_id, 'ready', null, claim);
    return sandbox;
  }

  /** Whether this runner holds the thread's state and git directories (the pod's volume outlives its pod). */
  async exists(threadId: string): Promise<boolean> {
    const dir = this.localDir(threadId);
    const state = await readState(dir);
    if (!state) return false;
    const present = (r: RepoState) => existsSync(join(dir, r.dir)) && existsSync(gitDirOf(dir, r.dir));
    return Object.values(state.repos).every(present);
  }

  /**
   * Kept in the runner's state file, not in the pod, where the agent could rewrite it. `harnessPid`
   * is a pid in the pod; its start time is read there now, so that a later look can tell it from a
   * process that got the pid since.
   */
  async rememberSession(sandbox: Sandbox, session: StoredSession | null, harnessPid?: number): Promise<void> {
    const dir = this.localDir(sandbox.threadId);
    const state = await readState(dir);
    if (!state) throw new SandboxError(`sandbox ${sandbox.id} has no state file`);
    const started = harnessPid === undefined ? null : await this.podStartTime(sandbox.threadId, harnessPid);
    const harness = harnessPid !== undefined && started !== null ? { pid: harnessPid, start_time: started } : null;
    await writeState(
      dir,
      { ...state, session_id: session?.id ?? null, session_harness: session?.harness ?? null, harness },
      sandbox.take,
    );
  }

  /**
   * Kills the recorded harness process in the pod (its process group when it leads one) if the
   * process with that pid has the start time recorded. The check and the kill run in one shell in
   * the pod, so what remains is the moment between them; the agent, the same uid in the same pod,
   * could kill the harness itself, never make another process pass for it (the start time is the
   * kernel's). A pod made anew since (the pid namespace with it) holds no harness of an earlier one.
   */
  async stopHarness(sandbox: Sandbox): Promise<boolean> {
    sandbox.take.check();
    const recorded = (await readState(this.localDir(sandbox.threadId)))?.harness;
    if (!recorded) return false;
    const script = `pid="$1"; start="$2"
stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || exit 3
set -- \${stat##*) }
[ "$1" != Z ] && [ "\${20:-}" = "$start" ] || exit 3
if [ "$3" = "$pid" ]; then kill -KILL -- "-$pid"; else kill -KILL "$pid"; fi`;
    const result = await this.run(sandbox.threadId, sandbox.take, [
      'sh',
      '-c',
      script,
      'sh',
      String(recorded.pid),
      recorded.start_time,
    ]);
    if (result.code === 3) return false;
    if (result.code !== 0)
      throw new SandboxError(`stopping the harness in the sandbox failed (exit ${result.code}): ${result.stderr}`);
    this.options.logger.warn(
      { thread_id: sandbox.threadId, pid: recorded.pid },
      'stopped the harness an earlier attempt left running in the sandbox pod',
    );
    return true;
  }

  /**
   * Bytes and inodes of the workspace volume as `du` in the pod counts them (on the volume only:
   * -x). The pod answers; an answer that is not exactly two counts is a failed measurement. Files
   * the pod's processes hold unlinked are not seen (the volume's own size bounds them); `jailPid`
   * does not apply.
   */
  async diskUsage(sandbox: Sandbox): Promise<DiskUsage> {
    let result: Answer;
    try {
      result = await this.run(sandbox.threadId, null, [
        'sh',
        '-c',
        'du -sx -B1 -- "$1" && du -sx --inodes -- "$1"',
        'sh',
        this.workspace,
      ]);
    } catch (err) {
      throw new DiskMeasureError(`the sandbox could not be measured: ${(err as Error).message}`, { cause: err });
    }
    if (result.code !== 0 || result.overflow)
      throw new DiskMeasureError(`du in the sandbox failed (exit ${result.code}): ${result.stderr}`);
    return parseDu(result.stdout, this.workspace);
  }

  async outgrown(sandbox: Sandbox): Promise<void> {
    const dir = this.localDir(sandbox.threadId);
    const state = await readState(dir);
    if (!state) throw new SandboxError(`sandbox ${sandbox.id} has no state file`);
    await writeState(dir, { ...state, outgrown: true }, sandbox.take);
  }

  async freeOutgrown(sandbox: Sandbox, max: DiskUsage): Promise<void> {
    const dir = this.localDir(sandbox.threadId);
    const state = await readState(dir);
    if (!state?.outgrown) return;
    await this.rebuild(dir, state, sandbox.take);
    const used = await this.diskUsage(sandbox).catch((err: unknown) => {
      if (!(err instanceof DiskMeasureError)) throw err;
      this.options.logger.warn({ thread_id: state.thread_id, err }, 'the rebuilt sandbox could not be measured');
      return null;
    });
    if (used && used.bytes <= max.bytes && used.inodes <= max.inodes) return;
    this.options.logger.warn(
      { thread_id: state.thread_id, used_bytes: used?.bytes, used_inodes: used?.inodes },
      'the harness’s home alone is past the sandbox’s bound on disk, or cannot be measured; removing it, and with it the conversation',
    );
    await this.inPod(
      sandbox.threadId,
      sandbox.take,
      ['rm', '-rf', '--one-file-system', '--', this.harnessHome()],
      'removing the harness’s home',
    );
    await this.inPod(
      sandbox.threadId,
      sandbox.take,
      ['mkdir', '-p', '--', this.harnessHome()],
      'making the harness’s home',
    );
    await writeState(dir, { ...state, repos: {}, session_id: null, session_harness: null }, sandbox.take);
  }

  status(threadId: string): SandboxStatus | null {
    const pod = this.options.pods.status(threadId);
    // The pod gone or failed is the sandbox's status whatever the runner last said; else the
    // runner's own (a pod is Ready before its workspaces are).
    if (pod === 'failed' || pod === 'stopped') return pod;
    return this.statuses.get(threadId) ?? pod;
  }

  /**
   * Deletes the pod after idling; its volume stays, for the next run to continue in. A pod that is
   * no longer this runner's (the thread moved to another) is left to the runner it is now.
   */
  /**
   * The thread's pod changed on its own (deleted after idling or from outside, evicted): once it is
   * gone, the sandbox's status follows it to `stopped` (its volume stays for the next run). What
   * else a pod goes through, the run preparing it says (`initializing`, `ready`, `failed`).
   */
  async podChanged(threadId: string, state: PodState): Promise<void> {
    if (state.status !== 'stopped' || !this.podsByThread.has(threadId)) return;
    if (this.statuses.get(threadId) === 'stopped') return;
    const recorded = await readState(this.localDir(threadId));
    await this.publish(threadId, recorded?.sandbox_id ?? null, 'stopped', state.reason ?? 'pod gone');
  }

  async stop(threadId: string): Promise<void> {
    const state = await readState(this.localDir(threadId));
    this.podsByThread.delete(threadId);
    if (this.options.pods.isOwn(threadId)) await this.options.pods.stopPod(threadId);
    await this.publish(threadId, state?.sandbox_id ?? null, 'stopped', 'idle');
  }

  /**
   * The agent's processes in the thread's pod could not be made sure to be gone: the pod is
   * deleted at once (its volume stays), and nothing more runs in it; the run going on fails at its
   * next exec, its work not taken.
   */
  private async compromised(threadId: string, reason: string): Promise<void> {
    this.options.logger.error({ thread_id: threadId, reason }, 'deleting a sandbox pod the agent may still run in');
    this.podsByThread.delete(threadId);
    const state = await readState(this.localDir(threadId));
    if (this.options.pods.isOwn(threadId)) await this.options.pods.stopPod(threadId, { now: true });
    await this.publish(threadId, state?.sandbox_id ?? null, 'stopped', reason);
  }

  /**
   * Empties a sandbox that grew past its bound: its workspaces and the agent's HOME in the pod, the
   * runner's git directories and copies; the harness's home, with the conversation, stays.
   */
  private async rebuild(dir: string, state: SandboxState, take: SandboxFence): Promise<void> {
    this.options.logger.warn({ thread_id: state.thread_id }, 'rebuilding a sandbox that grew past its bound on disk');
    const inPod = [...Object.values(state.repos).map((r) => this.podPath(r.dir)), this.home()];
    await this.inPod(state.thread_id, take, ['rm', '-rf', '--one-file-system', '--', ...inPod], 'emptying the sandbox');
    for (const repo of Object.values(state.repos)) {
      take.check();
      await rm(join(dir, repo.dir), { recursive: true, force: true });
      await rm(gitDirOf(dir, repo.dir), { recursive: true, force: true });
    }
    state.repos = {};
    delete state.outgrown;
    await writeState(dir, state, take);
  }

  /**
   * Brings the pod's work tree of `repo` into the runner's copy: the pod snapshots it on the copy's
   * HEAD (the revision it was given), the runner fetches the bundle (bounded, objects checked) and
   * checks its tree out over the copy. The repositories nested in it (gitlinks the pod's git
   * recorded) are left out, and a submodule the repository had keeps its revision, as the runner's
   * own staging does (candidate.ts). Refused, the copy is left as it was.
   */
  private async collect(threadId: string, take: SandboxFence, repo: SandboxRepo, folder: string): Promise<void> {
    const mine = runnerRepo(repo);
    const cwd = repo.gitDir;
    // None yet in a repository with no commits: the pod's work comes as a root commit.
    const head = await revision(cwd, mine, 'HEAD');
    this.checkPod(threadId, take);
    const received = await receiveTree(this.exec(threadId), {
      repo: mine,
      podRepo: this.podPath(folder),
      base: head,
      into: COLLECTED_REF,
      maxBytes: this.options.collectMaxBytes ?? DEFAULT_COLLECT_MAX_BYTES,
      ...(this.options.collectTree ? { tree: this.options.collectTree } : {}),
      timeoutMs: this.bundleTimeoutMs(),
    });
    try {
      const fixes = await gitlinkFixes(mine, head, received);
      take.check();
      // The index and the copy's files become the tree's: what the tree lacks goes, local changes too.
      await git(cwd, ['read-tree', '--reset', '-u', received], { repo: mine });
      for (const fix of fixes) await git(cwd, ['update-index', ...fix], { repo: mine });
    } finally {
      await git(cwd, ['update-ref', '-d', COLLECTED_REF], { repo: mine }).catch(() => undefined);
    }
  }

  /** Puts the runner's thread branch, as committed, into the pod; the agent's files there stay. */
  private async publishBranch(threadId: string, take: SandboxFence, repo: SandboxRepo, folder: string) {
    this.checkPod(threadId, take);
    await sendBranch(this.exec(threadId), {
      repo: runnerRepo(repo),
      branch: repo.branch,
      podRepo: this.podPath(folder),
      files: 'index',
      timeoutMs: this.bundleTimeoutMs(),
    });
  }

  private toSandbox(
    state: SandboxState,
    repositories: readonly RunRepository[],
    starts: ReadonlyMap<string, string | null>,
    take: SandboxFence,
  ): Sandbox {
    const dir = this.localDir(state.thread_id);
    const byId = new Map(repositories.map((r) => [r.project_repository_id, r]));
    const folders = new Map<string, string>();
    const repos: SandboxRepo[] = Object.entries(state.repos).flatMap(([id, r]) => {
      const repo = byId.get(id);
      if (!repo) return [];
      const local = join(dir, r.dir);
      folders.set(local, r.dir);
      return [
        {
          project_repository_id: id,
          repository_id: repo.repository_id,
          full_name: repo.full_name,
          dir: local,
          gitDir: gitDirOf(dir, r.dir),
          clone_url: repo.clone_url,
          start_revision: starts.get(id) ?? null,
          base_branch: repo.branch,
          branch: threadBranch(state.thread_id),
          recorded_base: r.base_revision,
        },
      ];
    });
    const folderOf = (repo: SandboxRepo) => {
      const folder = folders.get(repo.dir);
      if (!folder) throw new SandboxError(`${repo.full_name} is not a repository of sandbox ${state.sandbox_id}`);
      return folder;
    };
    const inPod = repos.map((r) => this.podPath(folderOf(r)));
    const threadId = state.thread_id;
    return {
      id: state.sandbox_id,
      threadId,
      dir: this.workspace,
      cwd: inPod.length === 1 && inPod[0] ? inPod[0] : this.workspace,
      harnessHome: this.harnessHome(),
      env: { PATH: POD_PATH, HOME: this.home(), CODEX_HOME: this.harnessHome(), LANG: 'C.UTF-8' },
      repos,
      // The pod is the jail: these are its paths, and the pod's repositories borrow nothing.
      mounts: { writable: [...inPod, this.harnessHome(), this.home()], readable: [] },
      owner: null,
      sessionId: state.session_id,
      sessionHarness: state.session_id ? (state.session_harness ?? 'codex') : null,
      take,
      ...(this.options.host
        ? { host: this.options.host(this.exec(threadId), (reason) => this.compromised(threadId, reason)) }
        : {}),
      collect: (repo) => this.collect(threadId, take, repo, folderOf(repo)),
      publish: (repo) => this.publishBranch(threadId, take, repo, folderOf(repo)),
    };
  }

  /** The start time (clock ticks after boot, `/proc/<pid>/stat` field 22) of a live process in the pod. */
  private async podStartTime(threadId: string, pid: number): Promise<string | null> {
    if (!Number.isInteger(pid) || pid <= 0) return null;
    const result = await this.run(threadId, null, ['cat', `/proc/${pid}/stat`]);
    if (result.code !== 0 || result.overflow) return null;
    return parseStatStart(result.stdout);
  }

  /** Runs a command that changes the pod; throws SandboxError saying `what` failed. */
  private async inPod(threadId: string, take: SandboxFence, argv: string[], what: string): Promise<void> {
    const result = await this.run(threadId, take, argv);
    if (result.code !== 0) throw new SandboxError(`${what} failed (exit ${result.code}): ${result.stderr}`);
  }

  /**
   * Runs `argv` in the pod with its stdout kept, bounded; `take`, when given, is checked first.
   * Throws SandboxError when it does not end within the scripts' deadline.
   */
  private async run(threadId: string, take: SandboxFence | null, argv: string[]): Promise<Answer> {
    if (take) this.checkPod(threadId, take);
    const timeoutMs = this.options.scriptTimeoutMs ?? SCRIPT_TIMEOUT_MS;
    const cut = new AbortController();
    const chunks: Buffer[] = [];
    let size = 0;
    const stdout = new Writable({
      write(chunk: Buffer, _enc, done) {
        size += chunk.length;
        if (size > ANSWER_MAX_BYTES) cut.abort();
        else chunks.push(chunk);
        done();
      },
    });
    const time = deadline(timeoutMs, cut.signal);
    const result = await this.exec(threadId)
      .run(argv, { stdout, signal: time.signal })
      .finally(() => time.clear());
    if (time.expired())
      throw new SandboxError(`a command in the sandbox pod did not finish within ${timeoutMs / 1000} s: ${argv[0]}`);
    return { ...result, stdout: Buffer.concat(chunks).toString('utf8'), overflow: cut.signal.aborted };
  }

  /** Throws when this attempt no longer holds the sandbox, or the pod is gone or another runner's. */
  private checkPod(threadId: string, take: SandboxFence): void {
    take.check();
    if (!this.options.pods.isOwn(threadId))
      throw new SandboxError(`the sandbox pod of thread ${threadId} is gone or no longer this runner's`);
  }

  private exec(threadId: string): PodExec {
    const pod = this.podsByThread.get(threadId);
    if (!pod) throw new SandboxError(`no sandbox pod of thread ${threadId} was prepared by this runner`);
    return this.options.exec(pod);
  }

  private bundleTimeoutMs(): number {
    return this.options.bundleTimeoutMs ?? BUNDLE_TIMEOUT_MS;
  }

  private localDir(threadId: string): string {
    return join(this.options.root, folderName(threadId));
  }

  private podPath(folder: string): string {
    return posix.join(this.workspace, folder);
  }

  private harnessHome(): string {
    return posix.join(this.workspace, HARNESS_FOLDER);
  }

  private home(): string {
    return posix.join(this.workspace, HOME_FOLDER);
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

interface Answer {
  code: number;
  stderr: string;
  stdout: string;
  /** The command printed more than an answer may hold (and was cut off). */
  overflow: boolean;
}

/** `du -s -B1` then `du -s --inodes` of `path`: exactly two lines, a count and the path each. */
export function parseDu(out: string, path: string): DiskUsage {
  const lines = out.split('\n');
  const count = (line: string | undefined) => {
    const tab = line?.indexOf('\t') ?? -1;
    const digits = tab > 0 ? line!.slice(0, tab) : '';
    if (!/^\d{1,15}$/.test(digits) || line!.slice(tab + 1) !== path) return null;
    return Number(digits);
  };
  const bytes = count(lines[0]);
  const inodes = count(lines[1]);
  if (lines.length !== 3 || lines[2] !== '' || bytes === null || inodes === null)
    throw new DiskMeasureError('the sandbox answered its measurement with something that is not one');
  return { bytes, inodes };
}

/** Field 22 of a `/proc/<pid>/stat` line (fields counted after the command name, which may hold anything). */
export function parseStatStart(stat: string): string | null {
  const close = stat.lastIndexOf(') ');
  if (close < 0) return null;
  const fields = stat
    .slice(close + 2)
    .trim()
    .split(' ');
  const state = fields[0];
  const start = fields[19];
  if (!state || state === 'Z' || state === 'X' || !start || !/^\d{1,20}$/.test(start)) return null;
  return start;
}

/**
 * The index entries to put back after `tree` is checked out over `head`: each gitlink that differs
 * from `head`'s, as `head` has it (a new one removed, a changed one at its old revision). Read from
 * the objects alone, before anything of the copy changes.
 */
async function gitlinkFixes(repo: GitRepo, head: string | null, tree: string): Promise<string[][]> {
  const raw = await git(repo.gitDir, ['diff-tree', '-r', '-z', '--no-renames', head ?? EMPTY_TREE, tree], { repo });
  const entries = raw.split('\0');
  const fixes: string[][] = [];
  for (let i = 0; i + 1 < entries.length; i += 2) {
    const [oldMode, newMode, oldId] = entries[i]!.replace(/^:/, '').split(' ');
    const path = entries[i + 1]!;
    if (newMode !== '160000' && oldMode !== '160000') continue;
    fixes.push(oldMode === '160000' ? ['--cacheinfo', `160000,${oldId},${path}`] : ['--force-remove', '--', path]);
  }
  return fixes;
}
