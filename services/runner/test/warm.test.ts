import { execFileSync } from 'node:child_process';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MessageCompletedEvent } from '@threadwork/contracts';
import { say, shell, turnScript, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRunner } from '../src/index.js';
import { gitEnvironment, loadConfig } from '@threadwork/platform';
import { RunnerConfig } from '../src/config.js';
import {
  admitRun,
  alive,
  domainOf,
  git,
  readLog,
  startStack,
  waitFor,
  waitForTerminal,
  type Admitted,
  type Stack,
} from './helpers.js';

// Spare sandboxes: after a run, the runner keeps a sandbox of the same repository ready with Codex
// started in it; a new thread of that repository adopts it (the same Codex process serves the
// thread's first turn), unless the remote's base moved since, and spares go with the runner.

const scripts = new Map<string, FakeScript>([
  [
    'WORK',
    turnScript([
      [shell('git status --short --branch; ls -i .git/config; printf "from the agent\\n" > agent.txt')],
      [say('Wrote agent.txt.')],
    ]),
  ],
]);

interface SandboxFile {
  thread_id: string;
  harness?: { pid: number } | null;
}

const gitEnv = gitEnvironment({ name: 'Someone Else', email: 'someone@threadwork.invalid' }, process.env);

const stateOf = (dir: string) => JSON.parse(readFileSync(join(dir, 'threadwork.json'), 'utf8')) as SandboxFile;

describe('spare sandboxes', () => {
  let stack: Stack;
  let first: Admitted;
  let spareAgentConfig: number;
  beforeAll(async () => {
    stack = await startStack(scripts, { runner: { RUNNER_WARM_SANDBOXES: '1', SANDBOX_IDLE_MS: '60000' } });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  const spares = () => readdirSync(stack.sandboxRoot).filter((name) => name.startsWith('sandbox.'));
  const unadopted = () => {
    const linked = new Set(
      readdirSync(stack.sandboxRoot)
        .filter((name) => lstatSync(join(stack.sandboxRoot, name)).isSymbolicLink())
        .map((name) => readlinkSync(join(stack.sandboxRoot, name))),
    );
    return spares().filter((name) => !linked.has(name));
  };
  const sparePid = (folder: string): number | undefined => {
    const marker = `CODEX_HOME=${join(stack.sandboxRoot, folder, 'codex-home')}\0`;
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const environ = readFileSync(`/proc/${entry}/environ`, 'utf8');
        const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
        if (environ.includes(marker) && cmdline.includes('app-server')) return Number(entry);
      } catch {
        // gone, or not ours to read
      }
    }
    return undefined;
  };

  it('keeps a spare of a repository it served, with Codex started in it and no run of anyone’s', async () => {
    first = await admitRun(stack, 'WORK please');
    expect((await waitForTerminal(stack, first.run.id)).status).toBe('completed');
    await waitFor('a spare sandbox', () => unadopted().length === 1 && stack.runner.spares()?.size === 1, 60_000);
    const [folder] = unadopted();
    const dir = join(stack.sandboxRoot, folder!);
    expect(stateOf(dir).thread_id).toBe('');
    const pid = sparePid(folder!);
    expect(pid).toBeDefined();
    // The repository at the base the remote has, no agent repository yet, no key anywhere in it.
    const workspace = join(dir, 'app');
    expect(readFileSync(join(workspace, 'README.md'), 'utf8')).toBe('# App\n');
    expect(existsSync(join(workspace, '.git'))).toBe(false);
    // Its agent repository is made already, aside in the runner's place, on the spare's own branch.
    const aside = join(dir, 'git', '.agent-git-spare-app');
    expect(readFileSync(join(aside, 'HEAD'), 'utf8')).toBe(`ref: refs/heads/threadwork/${folder}\n`);
    spareAgentConfig = statSync(join(aside, 'config')).ino;
    expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).not.toContain('sk-test-');
    // The mirror it was cloned from holds the base branch as the remote has it, nothing of the agent's.
    const mirrors = readdirSync(join(stack.sandboxRoot, '.mirrors'));
    expect(mirrors).toHaveLength(1);
    const mirror = join(stack.sandboxRoot, '.mirrors', mirrors[0]!);
    expect(git(mirror, 'for-each-ref', '--format=%(refname) %(objectname)').trim()).toBe(
      `refs/heads/main ${git(first.bare, 'rev-parse', 'main').trim()}`,
    );
    const agentsCommit = git(first.bare, 'rev-parse', `threadwork/${first.threadId}`).trim();
    expect(() => git(mirror, 'cat-file', '-e', agentsCommit)).toThrow();
  });

  it('a new thread of the repository adopts it: the spare’s Codex serves the turn, the work is pushed', async () => {
    const [folder] = unadopted();
    const pid = sparePid(folder!)!;
    const second = await admitRun(stack, 'WORK again', { repositories: first.request.repositories }, first.bare);
    const run = await waitForTerminal(stack, second.run.id);
    expect(run.status).toBe('completed');

    const link = join(stack.sandboxRoot, second.threadId);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe(folder);
    const dir = join(stack.sandboxRoot, folder!);
    expect(stateOf(dir).thread_id).toBe(second.threadId);
    expect(stateOf(dir).harness?.pid).toBe(pid);
    expect(alive(pid)).toBe(true);
    expect(existsSync(join(dir, 'spare.json'))).toBe(false);
    // Ready when adopted: the thread's sandbox was never initializing.
    expect(domainOf(stack, 'sandbox.status', second.threadId).map((e) => e.data.status)).toEqual(['ready']);

    // The agent's repository is on the thread branch; the runner pushed the agent's file there.
    const events = await readLog(stack.nc, second.run.id);
    const output = JSON.stringify(events);
    // `git status --branch` of the agent, in the spare's jail: its repository works, on the thread branch.
    expect(output).toContain(`## threadwork/${second.threadId}`);
    // That repository is the one made with the spare, moved in and renamed, not made again.
    expect(output).toContain(`${spareAgentConfig} .git/config`);
    const reply = MessageCompletedEvent.parse(domainOf(stack, 'message.completed', second.run.id)[0]?.data);
    expect(JSON.stringify(reply)).toContain('Wrote agent.txt.');
    expect(git(first.bare, 'show', `threadwork/${second.threadId}:agent.txt`)).toBe('from the agent\n');
    expect(git(join(dir, 'app'), 'rev-parse', '--abbrev-ref', 'HEAD').trim()).toBe(`threadwork/${second.threadId}`);
  });

  it('a spare made before the base moved is not adopted, and goes', async () => {
    await waitFor(
      'the next spare sandbox',
      () => unadopted().length === 1 && stack.runner.spares()?.size === 1,
      60_000,
    );
    const [stale] = unadopted();
    const pid = sparePid(stale!)!;
    // Someone pushes to the base branch.
    const work = mkdtempSync(join(tmpdir(), 'threadwork-warm-'));
    execFileSync('git', ['clone', '-q', first.bare, work], { env: gitEnv });
    writeFileSync(join(work, 'CHANGES.md'), 'moved\n');
    execFileSync('git', ['add', '-A'], { cwd: work, env: gitEnv });
    execFileSync('git', ['commit', '-q', '-m', 'move the base'], { cwd: work, env: gitEnv });
    execFileSync('git', ['push', '-q', 'origin', 'HEAD:main'], { cwd: work, env: gitEnv });

    const third = await admitRun(
      stack,
      'WORK on the moved base',
      { repositories: first.request.repositories },
      first.bare,
    );
    expect((await waitForTerminal(stack, third.run.id)).status).toBe('completed');
    const dir = join(stack.sandboxRoot, third.threadId);
    expect(lstatSync(dir).isDirectory()).toBe(true);
    expect(readFileSync(join(dir, 'app', 'CHANGES.md'), 'utf8')).toBe('moved\n');
    await waitFor('the stale spare removed', () => !alive(pid) && !existsSync(join(stack.sandboxRoot, stale!)), 30_000);
  });

  it('spares go with the runner; one a dead runner left is removed when the next starts', async () => {
    await waitFor(
      'a spare of the moved base',
      () => unadopted().length === 1 && stack.runner.spares()?.size === 1,
      60_000,
    );
    const [spare] = unadopted();
    const pid = sparePid(spare!)!;
    await stack.runner.stop();
    expect(alive(pid)).toBe(false);
    expect(unadopted()).toEqual([]);

    // A spare of a runner process that is gone (no such pid now: pids stay below 2^22), and one it
    // was still making.
    const left = join(stack.sandboxRoot, 'sandbox.0123456789abcdef01234567');
    const aside = join(stack.sandboxRoot, '.sandbox.0123456789abcdef01234568');
    for (const dir of [left, aside]) {
      mkdirSync(dir);
      writeFileSync(join(dir, 'spare.json'), JSON.stringify({ pid: 4_194_305, start_time: '1' }));
    }
    // And an adopted one, which stays whatever its file says.
    expect(spares().length).toBeGreaterThan(1);
    stack.runner = await startRunner(loadConfig(RunnerConfig, stack.runnerEnv({ RUNNER_WARM_SANDBOXES: '1' })));
    expect(existsSync(left)).toBe(false);
    expect(existsSync(aside)).toBe(false);
    const stillLinked = readlinkSync(
      join(
        stack.sandboxRoot,
        readdirSync(stack.sandboxRoot).find((n) => lstatSync(join(stack.sandboxRoot, n)).isSymbolicLink())!,
      ),
    );
    expect(existsSync(join(stack.sandboxRoot, stillLinked))).toBe(true);
  });

  it('a new clone takes nothing from the mirror the remote no longer has (a base rewritten)', async () => {
    // The base as the mirror has it, then rewritten on the remote without its last commit.
    const dropped = git(first.bare, 'rev-parse', 'main').trim();
    const work = mkdtempSync(join(tmpdir(), 'threadwork-warm-'));
    execFileSync('git', ['clone', '-q', first.bare, work], { env: gitEnv });
    execFileSync('git', ['reset', '-q', '--hard', 'HEAD~1'], { cwd: work, env: gitEnv });
    writeFileSync(join(work, 'OTHER.md'), 'instead\n');
    execFileSync('git', ['add', '-A'], { cwd: work, env: gitEnv });
    execFileSync('git', ['commit', '-q', '-m', 'rewritten base'], { cwd: work, env: gitEnv });
    execFileSync('git', ['push', '-q', '--force', 'origin', 'HEAD:main'], { cwd: work, env: gitEnv });
    const mirror = join(stack.sandboxRoot, '.mirrors', readdirSync(join(stack.sandboxRoot, '.mirrors'))[0]!);
    expect(git(mirror, 'rev-parse', 'main').trim()).toBe(dropped);

    const other = await admitRun(stack, 'WORK on the rewritten base', {}, first.bare);
    expect((await waitForTerminal(stack, other.run.id)).status).toBe('completed');
    const gitDir = join(stack.sandboxRoot, other.threadId, 'git', 'app.git');
    expect(existsSync(join(stack.sandboxRoot, other.threadId, 'app', 'OTHER.md'))).toBe(true);
    expect(() => git(gitDir, 'cat-file', '-e', dropped)).toThrow();
  });

  it('is made only once no run is on its way to its first event', async () => {
    const pool = stack.runner.spares()!;
    await pool.settled();
    const before = new Set(readdirSync(stack.sandboxRoot));
    const made = () => readdirSync(stack.sandboxRoot).filter((n) => !before.has(n) && /^\.?sandbox\./.test(n));
    // Another run, as far as the pool can tell, is on its way to its first event.
    const arrived = pool.hold();
    try {
      const run = await admitRun(stack, 'WORK in a repository of its own');
      expect((await waitForTerminal(stack, run.run.id)).status).toBe('completed');
      // The run is reported and over (the runner wants its spare a moment after the run ends): a
      // spare of its repository is wanted, and not begun.
      await waitFor('a spare of its repository wanted', () => pool.beingMade === 1, 30_000);
      const waiting = await Promise.race([
        pool.settled().then(() => 'made'),
        new Promise((resolve) => setTimeout(resolve, 1_000, 'waiting')),
      ]);
      expect(waiting).toBe('waiting');
      expect(made()).toEqual([]);
    } finally {
      arrived();
    }
    await waitFor('the spare, made once nothing waits', () => made().length === 1 && pool.size >= 1, 60_000);
  });

  it('a new thread that comes while the spare of its repository waits to be made has it made, and adopts it', async () => {
    const pool = stack.runner.spares()!;
    await pool.settled();
    // Another run, as far as the pool can tell, is on its way to its first event: spares wait.
    const arrived = pool.hold();
    try {
      const served = await admitRun(stack, 'WORK in a repository of its own again');
      expect((await waitForTerminal(stack, served.run.id)).status).toBe('completed');
      await waitFor('a spare of its repository wanted', () => pool.beingMade === 1, 30_000);
      const next = await admitRun(
        stack,
        'WORK there again',
        { repositories: served.request.repositories },
        served.bare,
      );
      expect((await waitForTerminal(stack, next.run.id)).status).toBe('completed');
      // The spare was made for it, though the other run still holds spares back, and adopted.
      const link = join(stack.sandboxRoot, next.threadId);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      expect(stateOf(join(stack.sandboxRoot, readlinkSync(link))).thread_id).toBe(next.threadId);
      expect(domainOf(stack, 'sandbox.status', next.threadId).map((e) => e.data.status)).toEqual(['ready']);
    } finally {
      arrived();
    }
  });
});
