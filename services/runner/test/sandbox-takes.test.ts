import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rpc, type RunJob, type SandboxStatus } from '@threadwork/contracts';
import { createLogger, request, retryAfterMs } from '@threadwork/platform';
import { newClaimId, uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attemptHolds } from '../src/clients/runs.js';
import { startTime } from '../src/harness/processes.js';
import { LocalSandboxProvider } from '../src/sandbox/local.js';
import { SandboxTake } from '../src/sandbox/take.js';
import { SandboxTakenError, type Sandbox, type SandboxClaim } from '../src/sandbox/provider.js';
import { admitRun, git, startStack, waitFor, type Admitted, type Stack } from './helpers.js';

// Runners sharing a disk share its sandboxes, and only the run attempt that holds a thread's run
// may change its sandbox. A runner that lost its run while held up (frozen, starved) in the middle
// of preparing the sandbox or starting a harness must, when it goes on, change nothing of the
// attempt that took the run over, nor of a later run's. Two providers on one sandbox root stand
// for two runners; the runs service is real, and so are the claims.

let stack: Stack;
const children: ChildProcess[] = [];

beforeAll(async () => {
  // A second claim of a run takes it over once the first claim's holder was silent for a lease (1 s here).
  stack = await startStack(new Map(), { runs: { JOB_ACK_WAIT_MS: '1000' } });
  // The attempts here are claimed by the test, for the providers it drives.
  await stack.runner.stop();
});
afterAll(async () => {
  for (const child of children) if (!gone(child)) child.kill('SIGKILL');
  await stack?.stop();
});

interface FakeRunner {
  provider: LocalSandboxProvider;
  statuses: { thread: string; status: SandboxStatus }[];
  /** Statuses whose next publication is lost (the runs service does not attest it, say). */
  lose: Set<SandboxStatus>;
  /**
   * Holds this runner up where it waits for a repository's credentials, mid-prepare (it asks as it
   * begins, and waits for the answer once it took the sandbox and said it is initializing), until `release`.
   */
  holdUp(): { reached: Promise<void>; release(): void };
}

function runner(): FakeRunner {
  let hold: { reached: () => void; released: Promise<void> } | null = null;
  const statuses: FakeRunner['statuses'] = [];
  const lose = new Set<SandboxStatus>();
  const provider = new LocalSandboxProvider({
    root: stack.sandboxRoot,
    logger: createLogger({ service: 'test', level: 'silent' }),
    publish: async (thread, _id, status) => {
      statuses.push({ thread, status });
      return !lose.delete(status);
    },
    credentials: async () => {
      const h = hold;
      hold = null;
      if (h) {
        h.reached();
        await h.released;
      }
      return null;
    },
  });
  return {
    provider,
    statuses,
    lose,
    holdUp() {
      let reached = () => {};
      let release = () => {};
      const reachedP = new Promise<void>((resolve) => (reached = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      hold = { reached, released };
      const initializing = () => statuses.some((s) => s.status === 'initializing');
      return {
        reached: reachedP.then(async () => void (await waitFor('the held runner to take the sandbox', initializing))),
        release,
      };
    },
  };
}

/**
 * Claims the run's next attempt as a runner would (coming back when told to while the run's holder
 * still holds its lease), and the claim the sandbox takes for it.
 */
async function claim(runId: string): Promise<{ job: RunJob; claim: SandboxClaim }> {
  const runnerId = uniqueId('runner-');
  const claimId = newClaimId();
  const res = await claimWhenFree({ run_id: runId, runner_id: runnerId, claim_id: claimId });
  return {
    job: res.job,
    claim: {
      run_id: runId,
      attempt: res.attempt,
      runner_id: runnerId,
      claim_id: claimId,
      holds: () => attemptHolds(stack.nc, { run_id: runId, attempt: res.attempt, claim_id: claimId }),
    },
  };
}

async function claimWhenFree(req: { run_id: string; runner_id: string; claim_id: string }) {
  for (;;) {
    try {
      return await request(stack.nc, rpc.runs.claim, req);
    } catch (err) {
      const wait = retryAfterMs(err);
      if (wait === null) throw err;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

async function complete(claim: SandboxClaim): Promise<void> {
  const fence = { run_id: claim.run_id, attempt: claim.attempt, claim_id: claim.claim_id };
  await request(stack.nc, rpc.runs.transition, { ...fence, to: 'running' });
  await request(stack.nc, rpc.runs.transition, { ...fence, to: 'completed' });
}

/** The thread's next run, claimed, once the last one is completed. */
async function nextRun(first: Admitted, last: SandboxClaim, prompt: string) {
  await complete(last);
  const { thread_id, owner_id, repositories } = first.request;
  return claim((await admitRun(stack, prompt, { thread_id, owner_id, repositories }, first.bare)).run.id);
}

const state = (sandbox: Sandbox) =>
  JSON.parse(readFileSync(join(sandbox.dir, 'threadwork.json'), 'utf8')) as {
    session_id: string | null;
    harness: { pid: number; start_time: string } | null;
  };

/** Stands in for a harness process: a process group of its own, with a child below it. */
function harness(): ChildProcess {
  const child = spawn('sh', ['-c', 'sleep 60 & wait'], { detached: true, stdio: 'ignore' });
  children.push(child);
  return child;
}

const gone = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/** What the newer attempt made of the sandbox, to be found unchanged. */
function leaveWork(sandbox: Sandbox): () => void {
  writeFileSync(join(sandbox.cwd, 'work.txt'), 'the newer attempt’s work\n');
  const head = git(sandbox.cwd, 'rev-parse', 'HEAD').trim();
  const before = state(sandbox);
  return () => {
    expect(readFileSync(join(sandbox.cwd, 'work.txt'), 'utf8')).toBe('the newer attempt’s work\n');
    expect(git(sandbox.cwd, 'rev-parse', 'HEAD').trim()).toBe(head);
    expect(git(sandbox.cwd, 'status', '--porcelain')).toBe('?? work.txt\n');
    expect(state(sandbox)).toEqual(before);
    expect(sandbox.take.current).toBe(true);
  };
}

describe.runIf(process.platform === 'linux')('a sandbox taken over while an older attempt prepared it', () => {
  it('is left alone by the older attempt when it goes on', async () => {
    const run: Admitted = await admitRun(stack, 'held up mid-prepare');
    const [held, takeover] = [runner(), runner()];
    const first = await claim(run.run.id);
    const hold = held.holdUp();
    const preparing = held.provider.prepare(first.job, first.claim);
    await hold.reached;

    const second = await claim(run.run.id);
    expect(second.claim.attempt).toBe(1);
    const sandbox = await takeover.provider.prepare(second.job, second.claim);
    await takeover.provider.rememberSession(sandbox, { harness: 'codex', id: 'session-of-attempt-1' });
    const unchanged = leaveWork(sandbox);

    hold.release();
    await expect(preparing).rejects.toBeInstanceOf(SandboxTakenError);
    unchanged();
    // It said nothing about the sandbox after it was taken: no `failed`, no `ready`.
    expect(held.statuses.map((s) => s.status)).toEqual(['initializing']);
    expect(takeover.statuses.map((s) => s.status)).toEqual(['initializing', 'ready']);
  });

  it('is not taken by an attempt that lost its run before it began', async () => {
    const run = await admitRun(stack, 'lost before prepare');
    const [late, takeover] = [runner(), runner()];
    const first = await claim(run.run.id);
    const second = await claim(run.run.id);
    const sandbox = await takeover.provider.prepare(second.job, second.claim);
    const unchanged = leaveWork(sandbox);

    await expect(late.provider.prepare(first.job, first.claim)).rejects.toBeInstanceOf(SandboxTakenError);
    unchanged();
    expect(late.statuses).toEqual([]);
  });

  it('is left alone by an attempt of an earlier run, held up since, once a later run took it', async () => {
    const run = await admitRun(stack, 'earlier run');
    const [held, takeover, next] = [runner(), runner(), runner()];
    const first = await claim(run.run.id);
    const hold = held.holdUp();
    const preparing = held.provider.prepare(first.job, first.claim);
    await hold.reached;

    // The run is taken over and finished; the thread's next run takes the sandbox.
    const second = await claim(run.run.id);
    const taken = await takeover.provider.prepare(second.job, second.claim);
    await complete(second.claim);
    const later = await admitRun(
      stack,
      'later run',
      { thread_id: run.threadId, owner_id: run.owner, repositories: run.request.repositories },
      run.bare,
    );
    const third = await claim(later.run.id);
    const sandbox = await next.provider.prepare(third.job, third.claim);
    expect(taken.take.current).toBe(false);
    const unchanged = leaveWork(sandbox);

    hold.release();
    await expect(preparing).rejects.toBeInstanceOf(SandboxTakenError);
    unchanged();
  });

  it('cannot stop the newer attempt’s harness or overwrite its session', async () => {
    const run = await admitRun(stack, 'stale harness start');
    const [stale, takeover] = [runner(), runner()];
    const first = await claim(run.run.id);
    const old = await stale.provider.prepare(first.job, first.claim);
    const second = await claim(run.run.id);
    const sandbox = await takeover.provider.prepare(second.job, second.claim);
    const child = harness();
    await takeover.provider.rememberSession(sandbox, { harness: 'codex', id: 'session-of-attempt-1' }, child.pid);

    await expect(stale.provider.stopHarness(old)).rejects.toBeInstanceOf(SandboxTakenError);
    await expect(
      stale.provider.rememberSession(old, { harness: 'codex', id: 'session-of-attempt-0' }),
    ).rejects.toBeInstanceOf(SandboxTakenError);
    expect(gone(child)).toBe(false);
    expect(state(sandbox)).toMatchObject({ session_id: 'session-of-attempt-1', harness: { pid: child.pid } });
  });
});

describe.runIf(process.platform === 'linux')('the agent’s repository made after a turn', () => {
  const gitDirInode = (sandbox: Sandbox) => statSync(join(sandbox.cwd, '.git')).ino;
  const plantHook = (sandbox: Sandbox) =>
    writeFileSync(join(sandbox.cwd, '.git', 'hooks', 'post-checkout'), '#!/bin/sh\n');
  const hookPlanted = (sandbox: Sandbox) => existsSync(join(sandbox.cwd, '.git', 'hooks', 'post-checkout'));

  /** A thread's first run, its sandbox prepared and its agent's repository recorded as its report made it. */
  async function madeAtRest(prompt: string) {
    const first = await admitRun(stack, prompt);
    const { provider } = runner();
    const one = await claim(first.run.id);
    const sandbox = await provider.prepare(one.job, one.claim);
    // The run's report made it anew after the turn (candidate.ts), nothing of the agent running.
    await sandbox.agentRepoAtRest?.(sandbox.repos[0]!);
    return { first, provider, one, sandbox };
  }

  it('is the next run’s as it is, and made anew once a turn may have changed it', async () => {
    const { first, provider, one, sandbox } = await madeAtRest('first turn');
    const made = gitDirInode(sandbox);

    const two = await nextRun(first, one.claim, 'second turn');
    const second = await provider.prepare(two.job, two.claim);
    expect(gitDirInode(second)).toBe(made);

    // The second run's turn plants a hook and its runner dies before the report.
    plantHook(second);
    const three = await nextRun(first, two.claim, 'third turn');
    const third = await provider.prepare(three.job, three.claim);
    expect(hookPlanted(third)).toBe(false);
    expect(gitDirInode(third)).not.toBe(made);

    // The third run reports, and something of the agent that outlived its turn plants a hook after.
    await third.agentRepoAtRest?.(third.repos[0]!);
    plantHook(third);
    const four = await nextRun(first, three.claim, 'fourth turn');
    const fourth = await provider.prepare(four.job, four.claim);
    expect(hookPlanted(fourth)).toBe(false);
  });

  it('is made anew when another take came between, though that one recorded nothing', async () => {
    const { first, provider, sandbox } = await madeAtRest('a turn, then a take that died');

    // A takeover takes the sandbox and its turn plants a hook; its runner dies before it writes anything.
    const takeover = await claim(first.run.id);
    await SandboxTake.take(sandbox.dir, takeover.claim);
    plantHook(sandbox);
    const next = await nextRun(first, takeover.claim, 'after the takeover');
    const after = await provider.prepare(next.job, next.claim);
    expect(hookPlanted(after)).toBe(false);
  });
});

describe.runIf(process.platform === 'linux')('the status of a sandbox a runner left ready', () => {
  it('stays as it is through that runner’s next run, and is said again once another runner had it', async () => {
    const first = await admitRun(stack, 'ready, then ready again');
    const [mine, theirs] = [runner(), runner()];
    const next = (last: SandboxClaim) => nextRun(first, last, 'the next run');
    const one = await claim(first.run.id);
    await mine.provider.prepare(one.job, one.claim);
    const two = await next(one.claim);
    await mine.provider.prepare(two.job, two.claim);
    expect(mine.statuses.map((s) => s.status)).toEqual(['initializing', 'ready']);

    const three = await next(two.claim);
    await theirs.provider.prepare(three.job, three.claim);
    // Said again, and lost: the runs service did not attest it, say.
    mine.lose.add('ready');
    const four = await next(three.claim);
    await mine.provider.prepare(four.job, four.claim);
    expect(mine.statuses.map((s) => s.status)).toEqual(['initializing', 'ready', 'initializing', 'ready']);

    // So the next run says it again.
    const five = await next(four.claim);
    await mine.provider.prepare(five.job, five.claim);
    expect(mine.statuses.map((s) => s.status)).toEqual([
      'initializing',
      'ready',
      'initializing',
      'ready',
      'initializing',
      'ready',
    ]);
  });
});

describe.runIf(process.platform === 'linux')('the harness recorded with a local sandbox', () => {
  it('is stopped by the next runner to start one, even frozen', async () => {
    const run = await admitRun(stack, 'frozen harness');
    const [one, two] = [runner(), runner()];
    const first = await claim(run.run.id);
    const sandbox = await one.provider.prepare(first.job, first.claim);
    const old = harness();
    await one.provider.rememberSession(sandbox, { harness: 'codex', id: 'session-1' }, old.pid);
    process.kill(old.pid as number, 'SIGSTOP');

    // Another runner on this disk, about to start its own process for the sandbox.
    const second = await claim(run.run.id);
    const again = await two.provider.prepare(second.job, second.claim);
    expect(again.sessionId).toBe('session-1');
    expect(await two.provider.stopHarness(again)).toBe(true);
    await waitFor('the frozen harness to be gone', () => startTime(old.pid as number) === null);
    // Nothing left to stop the second time.
    expect(await two.provider.stopHarness(again)).toBe(false);
  });

  it('is left alone when its pid now names another process', async () => {
    const run = await admitRun(stack, 'reused pid');
    const { provider } = runner();
    const first = await claim(run.run.id);
    const sandbox = await provider.prepare(first.job, first.claim);
    const other = harness();
    await provider.rememberSession(sandbox, { harness: 'codex', id: 'session-2' }, other.pid);
    // The recorded process is long gone and its pid was reused: same pid, another start time.
    const stateFile = join(sandbox.dir, 'threadwork.json');
    const recorded = JSON.parse(readFileSync(stateFile, 'utf8')) as { harness: { start_time: string } };
    recorded.harness.start_time = String(Number(recorded.harness.start_time) - 1);
    writeFileSync(stateFile, JSON.stringify(recorded));

    expect(await provider.stopHarness(sandbox)).toBe(false);
    expect(gone(other)).toBe(false);
    expect(startTime(other.pid as number)).not.toBeNull();
  });

  it('records no process when none runs', async () => {
    const run = await admitRun(stack, 'no harness');
    const { provider } = runner();
    const first = await claim(run.run.id);
    const sandbox = await provider.prepare(first.job, first.claim);
    await provider.rememberSession(sandbox, { harness: 'codex', id: 'session-3' });
    expect(await provider.exists(run.threadId)).toBe(true);
    expect(state(sandbox)).toMatchObject({ session_id: 'session-3', harness: null });
    expect(await provider.stopHarness(sandbox)).toBe(false);
  });
});
