// The kubernetes provider without an API server: the pod is a stand-in (localExec: a local process
// in a temporary folder standing for the pod's workspace volume, so paths "in the pod" are real
// temporary paths) and so is its lifecycle (SandboxPods needs an API server; test/cluster runs the
// provider on the real one). Real git on both sides, and a bare repository as the remote: what is
// shown is what the runner's commands do with what the pod holds, a hostile pod's included.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunJob, SandboxStatus } from '@threadwork/contracts';
import { createLogger } from '@threadwork/platform';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startTime } from '../../harness/processes.js';
import { commitAndDiff } from '../candidate.js';
import { DiskMeasureError } from '../disk.js';
import { readState } from '../local-state.js';
import { SandboxError, SandboxTakenError, type Sandbox, type SandboxRepo } from '../provider.js';
import type { SandboxClaim } from '../take.js';
import { BundleError } from './bundle.js';
import { localExec, type PodExec } from './exec.js';
import type { SandboxPod } from './pods.js';
import {
  KubernetesSandboxProvider,
  parseDu,
  parseStatStart,
  type KubernetesSandboxOptions,
  type PodLifecycle,
} from './provider.js';
import { podHost } from './process.js';
import { CONTAINER, sandboxName } from './spec.js';

let root: string;
let remote: string;
let workspace: string;
let runnerRoot: string;
const children: ChildProcess[] = [];

const sh = (cwd: string, args: string[]) =>
  execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      HOME: root,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      GIT_AUTHOR_NAME: 'a',
      GIT_AUTHOR_EMAIL: 'a@a',
      GIT_COMMITTER_NAME: 'a',
      GIT_COMMITTER_EMAIL: 'a@a',
    },
  }).trim();

/** The pod's lifecycle as SandboxPods keeps it, in memory: a pod per thread, Ready once ensured. */
class PodsStandIn implements PodLifecycle {
  readonly states = new Map<string, SandboxStatus>();
  ensure(threadId: string): Promise<SandboxPod> {
    this.states.set(threadId, 'ready');
    return Promise.resolve({ threadId, namespace: 'sandboxes', name: sandboxName(threadId), container: CONTAINER });
  }
  isOwn(threadId: string): boolean {
    return this.states.get(threadId) === 'ready';
  }
  status(threadId: string): SandboxStatus | null {
    return this.states.get(threadId) ?? null;
  }
  readonly stopped: { threadId: string; now: boolean }[] = [];
  stopPod(threadId: string, opts: { now?: boolean } = {}): Promise<void> {
    this.stopped.push({ threadId, now: opts.now === true });
    this.states.set(threadId, 'stopped');
    return Promise.resolve();
  }
}

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'threadwork-k8s-provider-'));
  const seed = join(root, 'seed');
  mkdirSync(seed);
  sh(seed, ['init', '-q', '-b', 'main']);
  writeFileSync(join(seed, 'README.md'), '# App\n');
  writeFileSync(join(seed, '.gitignore'), 'node_modules/\n');
  sh(seed, ['add', '-A']);
  sh(seed, ['commit', '-q', '-m', 'initial commit']);
  remote = join(root, 'app.git');
  sh(root, ['clone', '-q', '--bare', seed, remote]);
  workspace = join(root, 'pod', 'workspace');
  mkdirSync(workspace, { recursive: true });
  runnerRoot = join(root, 'runner');
});

afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  rmSync(root, { recursive: true, force: true });
});

function provider(over: Partial<KubernetesSandboxOptions> = {}) {
  const pods = new PodsStandIn();
  const statuses: { status: SandboxStatus; reason: string | null }[] = [];
  const p = new KubernetesSandboxProvider({
    pods,
    exec: () => localExec(),
    root: runnerRoot,
    workspace,
    logger: createLogger({ service: 'test', level: 'silent' }),
    publish: (_thread, _sandbox, status, reason) => {
      statuses.push({ status, reason });
      return Promise.resolve(true);
    },
    ...over,
  });
  return { p, pods, statuses };
}

const uid = (prefix: string) => `${prefix}${randomBytes(6).toString('hex')}`;

function job(threadId: string): RunJob {
  return {
    run_id: uid('run_'),
    thread_id: threadId,
    project_id: 'prj_1',
    owner_id: 'usr_1',
    message_id: 'msg_1',
    prompt: 'add a file',
    harness: 'codex',
    model: 'test-model',
    reasoning_effort: 'medium',
    collaboration_mode: 'default',
    repositories: [
      {
        project_repository_id: 'prp_1',
        repository_id: 7,
        full_name: 'acme/app',
        branch: 'main',
        clone_url: `file://${remote}`,
      },
    ],
  };
}

/** An attempt that the runs service says holds its run (the take itself is on the runner's disk). */
function claim(j: RunJob, attempt = 1): SandboxClaim {
  return {
    run_id: j.run_id,
    attempt,
    runner_id: 'runner-1',
    claim_id: uid('clm_'),
    holds: () => Promise.resolve(true),
  };
}

async function prepared(over: Partial<KubernetesSandboxOptions> = {}) {
  const made = provider(over);
  const j = job(uid('thr_'));
  const sandbox = await made.p.prepare(j, claim(j));
  const repo = sandbox.repos[0]!;
  return { ...made, j, sandbox, repo, podRepo: join(workspace, 'app') };
}

const commit = (sandbox: Sandbox, repo: SandboxRepo) =>
  commitAndDiff(repo, sandbox.take, { message: 'run', maxDiffBytes: 1024 * 1024, owner: null });

const runnerGit = (repo: SandboxRepo, args: string[]) => sh(root, ['--git-dir', repo.gitDir, ...args]);

describe('the kubernetes sandbox provider', () => {
  it('clones on the runner and puts the thread branch into the pod, with in-pod paths for the harness', async () => {
    const { sandbox, repo, podRepo, statuses, j } = await prepared();
    expect(statuses.map((s) => s.status)).toEqual(['initializing', 'ready']);
    const main = sh(root, ['--git-dir', remote, 'rev-parse', 'main']);
    expect(sh(podRepo, ['rev-parse', 'HEAD'])).toBe(main);
    expect(sh(podRepo, ['symbolic-ref', 'HEAD'])).toBe(`refs/heads/threadwork/${j.thread_id}`);
    expect(sh(podRepo, ['remote'])).toBe('');
    expect(readFileSync(join(podRepo, 'README.md'), 'utf8')).toBe('# App\n');
    // The runner's copy and git directory are its own, outside the pod; the copy has no agent `.git`.
    expect(repo.dir.startsWith(runnerRoot)).toBe(true);
    expect(repo.gitDir.startsWith(runnerRoot)).toBe(true);
    expect(existsSync(join(repo.dir, '.git'))).toBe(false);
    expect(runnerGit(repo, ['rev-parse', 'HEAD'])).toBe(main);
    expect(sandbox.cwd).toBe(podRepo);
    expect(sandbox.harnessHome).toBe(join(workspace, '.harness'));
    expect(sandbox.env.HOME).toBe(join(workspace, 'home'));
    expect(sandbox.mounts).toEqual({
      writable: [podRepo, join(workspace, '.harness'), join(workspace, 'home')],
      readable: [],
    });
    expect(existsSync(join(workspace, '.harness'))).toBe(true);
    // Nothing of the runner's state is in the pod.
    expect(existsSync(join(workspace, 'threadwork.json'))).toBe(false);
    expect(existsSync(join(workspace, 'git'))).toBe(false);
  });

  it('commits what the agent left in the pod, and shows the commit in the pod’s repository', async () => {
    const { sandbox, repo, podRepo } = await prepared();
    writeFileSync(join(podRepo, 'README.md'), '# App, changed\n');
    writeFileSync(join(podRepo, 'new.txt'), 'new\n');
    mkdirSync(join(podRepo, 'node_modules'));
    writeFileSync(join(podRepo, 'node_modules', 'dep.js'), 'ignored');
    // A link to a file of the host, and a repository of the agent's nested in the workspace.
    symlinkSync('/etc/passwd', join(podRepo, 'passwd'));
    const nested = join(podRepo, 'vendor');
    mkdirSync(nested);
    sh(nested, ['init', '-q']);
    writeFileSync(join(nested, 'x.txt'), 'x');
    sh(nested, ['add', '-A']);
    sh(nested, ['commit', '-q', '-m', 'nested']);
    // The agent's own commit changes nothing of what the runner takes.
    sh(podRepo, ['add', 'new.txt']);
    sh(podRepo, ['commit', '-q', '-m', 'the agent’s commit']);

    await sandbox.collect!(repo);
    const candidate = await commit(sandbox, repo);
    expect(candidate.committed).toBe(true);
    expect(candidate.files.map((f) => f.path).sort()).toEqual(['README.md', 'new.txt', 'passwd']);
    expect(runnerGit(repo, ['show', 'HEAD:README.md'])).toBe('# App, changed');
    // The link is committed as a link: its target's name, never the host file's content.
    expect(runnerGit(repo, ['ls-tree', 'HEAD', 'passwd'])).toMatch(/^120000 blob /);
    expect(runnerGit(repo, ['cat-file', 'blob', 'HEAD:passwd'])).toBe('/etc/passwd');
    expect(lstatSync(join(repo.dir, 'passwd')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(repo.dir, 'passwd'))).toBe('/etc/passwd');
    // The nested repository stays out of the commit, as the local provider leaves it out.
    expect(runnerGit(repo, ['ls-tree', '--name-only', 'HEAD'])).not.toMatch(/vendor/);
    expect(runnerGit(repo, ['log', '--format=%s', 'HEAD'])).not.toMatch(/the agent’s commit|snapshot/);

    await sandbox.publish!(repo);
    expect(sh(podRepo, ['rev-parse', 'HEAD'])).toBe(candidate.candidate_revision);
    expect(sh(podRepo, ['status', '--porcelain', '--untracked-files=no'])).toBe('');
    expect(readFileSync(join(podRepo, 'new.txt'), 'utf8')).toBe('new\n');
    expect(existsSync(join(podRepo, 'node_modules', 'dep.js'))).toBe(true);

    // Nothing more changed: the next collect and commit make no commit.
    await sandbox.collect!(repo);
    expect((await commit(sandbox, repo)).committed).toBe(false);
  });

  it('starts a repository with no commits in the pod, and commits the agent’s first files as its root', async () => {
    rmSync(remote, { recursive: true, force: true });
    sh(root, ['init', '-q', '--bare', remote]);
    const { sandbox, repo, podRepo, j } = await prepared();
    expect(sh(podRepo, ['symbolic-ref', 'HEAD'])).toBe(`refs/heads/threadwork/${j.thread_id}`);
    expect(() => sh(podRepo, ['rev-parse', '--verify', '-q', 'HEAD'])).toThrow();
    writeFileSync(join(podRepo, 'first.txt'), 'first\n');
    await sandbox.collect!(repo);
    const candidate = await commit(sandbox, repo);
    expect(candidate.committed).toBe(true);
    expect(candidate.files.map((f) => f.path)).toEqual(['first.txt']);
    expect(runnerGit(repo, ['rev-list', '--count', 'HEAD'])).toBe('1');
    await sandbox.publish!(repo);
    expect(sh(podRepo, ['rev-parse', 'HEAD'])).toBe(candidate.candidate_revision);
    expect(sh(podRepo, ['status', '--porcelain'])).toBe('');
  });

  it('never writes through a link the agent committed, when the next tree puts a folder in its place', async () => {
    const { sandbox, repo, podRepo } = await prepared();
    const outside = join(root, 'runner-private');
    mkdirSync(outside);
    symlinkSync(outside, join(podRepo, 'escape'));
    await sandbox.collect!(repo);
    await commit(sandbox, repo);
    await sandbox.publish!(repo);
    expect(lstatSync(join(repo.dir, 'escape')).isSymbolicLink()).toBe(true);
    rmSync(join(podRepo, 'escape'));
    mkdirSync(join(podRepo, 'escape'));
    writeFileSync(join(podRepo, 'escape', 'pwned'), 'x');
    await sandbox.collect!(repo);
    expect(existsSync(join(outside, 'pwned'))).toBe(false);
    expect(lstatSync(join(repo.dir, 'escape')).isDirectory()).toBe(true);
    expect(readFileSync(join(repo.dir, 'escape', 'pwned'), 'utf8')).toBe('x');
  });

  it('refuses a workspace past its bound, or one whose repository the agent broke, leaving the runner’s copy as it was', async () => {
    const { sandbox, repo, podRepo } = await prepared({ collectMaxBytes: 256 * 1024 });
    const before = runnerGit(repo, ['rev-parse', 'HEAD']);
    writeFileSync(join(podRepo, 'README.md'), '# App, changed\n');
    writeFileSync(join(podRepo, 'huge.bin'), randomBytes(1024 * 1024));
    await expect(sandbox.collect!(repo)).rejects.toThrow(/larger than 262144 bytes/);
    expect(readFileSync(join(repo.dir, 'README.md'), 'utf8')).toBe('# App\n');
    expect(existsSync(join(repo.dir, 'huge.bin'))).toBe(false);
    rmSync(join(podRepo, 'huge.bin'));

    // A `.git` that is no repository.
    rmSync(join(podRepo, '.git'), { recursive: true, force: true });
    writeFileSync(join(podRepo, '.git'), 'gitdir: /nowhere\n');
    await expect(sandbox.collect!(repo)).rejects.toThrow(BundleError);
    // A `.git` whose objects lost the revision the runner gave it.
    rmSync(join(podRepo, '.git'), { force: true });
    sh(podRepo, ['init', '-q']);
    await expect(sandbox.collect!(repo)).rejects.toThrow(/taking the work out of the sandbox failed/);
    expect(readFileSync(join(repo.dir, 'README.md'), 'utf8')).toBe('# App\n');
    expect(runnerGit(repo, ['rev-parse', 'HEAD'])).toBe(before);
    expect(runnerGit(repo, ['for-each-ref', 'refs/threadwork/'])).toBe('');

    // A pod that answers with a commit forged off the revision: refused.
    const forging: PodExec = {
      run: (argv, io) =>
        argv[0] === 'sh' && argv[2]?.includes('bundle create')
          ? localExec().run(
              [
                'sh',
                '-c',
                `set -e; cd "$1"; rm -rf .git; git init -q; git add -A; t=$(git write-tree); c=$(GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@a GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@a git commit-tree "$t" -m forged); git update-ref refs/threadwork/snapshot "$c"; b=$(mktemp); git bundle create -q "$b" refs/threadwork/snapshot 2>/dev/null; cat "$b"; rm -f "$b"`,
                'sh',
                podRepo,
              ],
              io,
            )
          : localExec().run(argv, io),
    };
    const hostile = await prepared({ exec: () => forging });
    writeFileSync(join(hostile.podRepo, 'README.md'), 'forged\n');
    await expect(hostile.sandbox.collect!(hostile.repo)).rejects.toThrow(/not on the revision it was given/);
    expect(readFileSync(join(hostile.repo.dir, 'README.md'), 'utf8')).toBe('# App\n');
  });

  it('goes on where the pod is this runner’s only', async () => {
    const { sandbox, repo, pods, p, j } = await prepared();
    await p.stop(j.thread_id);
    expect(p.status(j.thread_id)).toBe('stopped');
    expect(pods.states.get(j.thread_id)).toBe('stopped');
    await expect(sandbox.collect!(repo)).rejects.toThrow(SandboxError);
    await expect(sandbox.collect!(repo)).rejects.toThrow(/gone or no longer this runner's/);
  });

  it('lets a newer attempt take the sandbox: the older one changes nothing after', async () => {
    const { p, j, sandbox, repo, podRepo } = await prepared();
    const second = await p.prepare(j, claim(j, 2));
    expect(second.take.current).toBe(true);
    expect(sandbox.take.current).toBe(false);
    writeFileSync(join(podRepo, 'README.md'), 'changed\n');
    await expect(sandbox.collect!(repo)).rejects.toThrow(SandboxTakenError);
    await expect(commit(sandbox, repo)).rejects.toThrow(SandboxTakenError);
    await expect(p.rememberSession(sandbox, { harness: 'codex', id: 'old' })).rejects.toThrow(SandboxTakenError);
    await expect(p.prepare(j, claim(j, 1))).rejects.toThrow(SandboxTakenError);
    expect(readFileSync(join(second.repos[0]!.dir, 'README.md'), 'utf8')).toBe('# App\n');
    // The newer one continues in the pod: the agent's edit there stays.
    await second.collect!(second.repos[0]!);
    expect(readFileSync(join(second.repos[0]!.dir, 'README.md'), 'utf8')).toBe('changed\n');
  });

  it('remembers the session on the runner, and stops the recorded harness only while it is that process', async () => {
    const { p, j, sandbox } = await prepared();
    expect(await p.exists(j.thread_id)).toBe(true);
    expect(await p.exists(uid('thr_'))).toBe(false);
    const harness = spawn('sleep', ['300'], { stdio: 'ignore' });
    children.push(harness);
    const exited = new Promise((resolve) => harness.once('exit', resolve));
    await p.rememberSession(sandbox, { harness: 'codex', id: 'sess-1' }, harness.pid);
    const state = await readState(join(runnerRoot, j.thread_id));
    expect(state?.session_id).toBe('sess-1');
    expect(state?.harness).toEqual({ pid: harness.pid, start_time: startTime(harness.pid!) });
    expect(existsSync(join(workspace, 'threadwork.json'))).toBe(false);

    const again = await p.prepare(j, claim(j, 2));
    expect(again.sessionId).toBe('sess-1');
    expect(again.sessionHarness).toBe('codex');
    expect(await p.stopHarness(again)).toBe(true);
    await exited;
    expect(await p.stopHarness(again)).toBe(false);

    // A pid recorded with another start time is not taken for the harness.
    const other = spawn('sleep', ['300'], { stdio: 'ignore' });
    children.push(other);
    await p.rememberSession(again, { harness: 'codex', id: 'sess-2' }, other.pid);
    const file = join(runnerRoot, j.thread_id, 'threadwork.json');
    const recorded = JSON.parse(readFileSync(file, 'utf8')) as { harness: { start_time: string } };
    recorded.harness.start_time = '1';
    writeFileSync(file, JSON.stringify(recorded));
    expect(await p.stopHarness(again)).toBe(false);
    expect(other.exitCode).toBe(null);
    expect(startTime(other.pid!)).not.toBe(null);
  });

  it('refuses a tree past the sandbox’s bounds on disk, and cuts off a pod that does not answer, leaving the copy as it was', async () => {
    let stalled = false;
    const pod: PodExec = { run: (argv, io) => localExec().run(stalled ? ['sleep', '1000'] : argv, io) };
    const { sandbox, repo, podRepo, p } = await prepared({
      exec: () => pod,
      collectTree: { maxBytes: 2 * 1024 * 1024, maxEntries: 1000 },
      bundleTimeoutMs: 5_000,
      scriptTimeoutMs: 5_000,
    });
    const before = runnerGit(repo, ['rev-parse', 'HEAD']);
    // Small as a bundle, large checked out.
    writeFileSync(join(podRepo, 'README.md'), '# App, changed\n');
    writeFileSync(join(podRepo, 'zeros.bin'), Buffer.alloc(3 * 1024 * 1024));
    await expect(sandbox.collect!(repo)).rejects.toThrow(/too large to take: more than 2097152 bytes/);
    expect(readFileSync(join(repo.dir, 'README.md'), 'utf8')).toBe('# App\n');
    expect(existsSync(join(repo.dir, 'zeros.bin'))).toBe(false);
    expect(runnerGit(repo, ['rev-parse', 'HEAD'])).toBe(before);
    expect(runnerGit(repo, ['for-each-ref', 'refs/threadwork/'])).toBe('');

    stalled = true;
    await expect(sandbox.collect!(repo)).rejects.toThrow(/did not finish within 5 s/);
    await expect(sandbox.publish!(repo)).rejects.toThrow(/did not finish within 5 s/);
    await expect(p.diskUsage(sandbox)).rejects.toThrow(/did not finish within 5 s/);
    expect(readFileSync(join(repo.dir, 'README.md'), 'utf8')).toBe('# App\n');
  });

  it('deletes the pod at once when its host cannot make sure the agent’s processes are gone', async () => {
    let compromised: ((reason: string) => Promise<void>) | null = null;
    const { sandbox, repo, pods, statuses, j } = await prepared({
      host: (exec, report) => {
        compromised = report;
        return podHost(exec, { openGates: () => Promise.reject(new Error('no gates here')) });
      },
    });
    expect(sandbox.host).toBeDefined();
    await compromised!('the agent’s processes in the pod could not all be killed');
    expect(pods.stopped).toEqual([{ threadId: j.thread_id, now: true }]);
    expect(statuses.at(-1)).toEqual({
      status: 'stopped',
      reason: 'the agent’s processes in the pod could not all be killed',
    });
    // Nothing more runs in that pod: its work is not taken.
    await expect(sandbox.collect!(repo)).rejects.toThrow(SandboxError);
  });

  it('measures the pod’s workspace, and takes an answer that is not a measurement for a failed one', async () => {
    // The pod answers honestly until `answer` says what it answers instead.
    let answer: string | null = null;
    const pod: PodExec = {
      run: (argv, io) => localExec().run(answer === null ? argv : ['sh', '-c', answer, 'sh', workspace], io),
    };
    const { sandbox, p } = await prepared({ exec: () => pod });
    writeFileSync(join(workspace, 'home', 'big'), randomBytes(300 * 1024));
    const used = await p.diskUsage(sandbox);
    expect(used.bytes).toBeGreaterThanOrEqual(300 * 1024);
    const entries = execFileSync('sh', ['-c', 'find "$1" | wc -l', 'sh', workspace], { encoding: 'utf8' });
    expect(used.inodes).toBe(Number(entries.trim()));

    for (const script of [
      'printf "12\\t/elsewhere\\n3\\t/elsewhere\\n"',
      'printf "12\\t%s\\n" "$1"',
      'printf "12\\t%s\\n3\\t%s\\nmore\\n" "$1" "$1"',
      'printf "1e9\\t%s\\n3\\t%s\\n" "$1" "$1"',
      'head -c 100000 /dev/zero',
      'echo 5; exit 1',
    ]) {
      answer = script;
      await expect(p.diskUsage(sandbox)).rejects.toThrow(DiskMeasureError);
    }
    answer = 'printf "12\\t%s\\n3\\t%s\\n" "$1" "$1"';
    expect(await p.diskUsage(sandbox)).toEqual({ bytes: 12, inodes: 3 });
  });

  it('frees an outgrown sandbox in the pod and on the runner; the next run clones again', async () => {
    const { p, j, sandbox, repo, podRepo } = await prepared();
    await p.rememberSession(sandbox, { harness: 'codex', id: 'sess-1' });
    writeFileSync(join(workspace, 'home', 'cache'), 'x');
    writeFileSync(join(workspace, '.harness', 'session.jsonl'), 'conversation');
    await p.outgrown(sandbox);
    await p.freeOutgrown(sandbox, { bytes: 1024 ** 4, inodes: 1e9 });
    expect(existsSync(podRepo)).toBe(false);
    expect(existsSync(join(workspace, 'home', 'cache'))).toBe(false);
    expect(existsSync(repo.dir)).toBe(false);
    expect(existsSync(repo.gitDir)).toBe(false);
    expect(readFileSync(join(workspace, '.harness', 'session.jsonl'), 'utf8')).toBe('conversation');

    const next = await p.prepare(j, claim(j, 2));
    expect(next.sessionId).toBe('sess-1');
    expect(readFileSync(join(podRepo, 'README.md'), 'utf8')).toBe('# App\n');

    // Past the bound even so: the harness's home goes too, and the session with it.
    await p.outgrown(next);
    await p.freeOutgrown(next, { bytes: 1, inodes: 1 });
    expect(existsSync(join(workspace, '.harness', 'session.jsonl'))).toBe(false);
    expect((await p.prepare(j, claim(j, 3))).sessionId).toBe(null);
  });
});

describe('answers from the pod', () => {
  it('parse strictly', () => {
    expect(parseDu('4096\t/w\n7\t/w\n', '/w')).toEqual({ bytes: 4096, inodes: 7 });
    for (const bad of ['', '4096\t/w\n', '4096\t/w\n7\t/w', '4096 /w\n7\t/w\n', '-1\t/w\n7\t/w\n', '4096\t/x\n7\t/w\n'])
      expect(() => parseDu(bad, '/w')).toThrow(DiskMeasureError);
    const stat = (comm: string, state: string) =>
      `42 (${comm}) ${state} 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 0 0 0 0`;
    expect(parseStatStart(stat('codex', 'S'))).toBe('987654');
    expect(parseStatStart(stat('a) S 1 2 3 (b', 'S'))).toBe('987654');
    expect(parseStatStart(stat('codex', 'Z'))).toBe(null);
    expect(parseStatStart('garbage')).toBe(null);
  });
});
