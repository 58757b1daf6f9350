import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { say, shell, turnScript, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitRun, domainOf, git, startStack, waitForTerminal, type Stack } from './helpers.js';

// A sandbox is bounded on disk (SANDBOX_DISK_MAX_BYTES), measured while a turn runs: an agent
// that fills it has its run failed, nothing of it committed or pushed, and the thread's next run
// finds its workspace rebuilt from the branch and its conversation kept; the space is freed at once.

const MIB = 2 ** 20;

const scripts = new Map<string, FakeScript>([
  [
    'FILL',
    turnScript([
      [shell(`head -c ${64 * MIB} /dev/zero > big.bin && echo filled && sleep 60`)],
      [say('filled the disk')],
    ]),
  ],
  ['AGAIN', turnScript([[shell('ls -a; echo "home: $(ls -A "$HOME")"')], [say('looked')]])],
]);

describe('a sandbox past its bound on disk', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts, {
      runner: { SANDBOX_DISK_MAX_BYTES: String(32 * MIB), SANDBOX_DISK_CHECK_MS: '200' },
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('fails its run sandbox_disk_full, commits nothing, and is rebuilt for the next run', async () => {
    const first = await admitRun(stack, 'FILL the disk');
    const run = await waitForTerminal(stack, first.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('failed');
    expect(run.error?.code).toBe('sandbox_disk_full');
    // Nothing committed, nothing pushed, no candidate.
    expect(domainOf(stack, 'candidateProduced', first.run.id)).toEqual([]);
    expect(() => git(first.bare, 'rev-parse', '--verify', `refs/heads/threadwork/${first.threadId}`)).toThrow();
    // The space is freed as the run ends, not at the thread's next run (which may never come): the
    // workspace is gone, to be cloned again; the conversation is kept.
    const workspace = join(stack.sandboxRoot, first.threadId, 'app');
    expect(existsSync(join(workspace, 'big.bin'))).toBe(false);
    const state = JSON.parse(readFileSync(join(stack.sandboxRoot, first.threadId, 'threadwork.json'), 'utf8'));
    expect(state.outgrown).toBeUndefined();
    expect(state.repos).toEqual({});
    expect(state.session_id).toBeTruthy();

    const next = await admitRun(
      stack,
      'AGAIN, what is here?',
      { thread_id: first.threadId, owner_id: first.owner, repositories: first.request.repositories },
      first.bare,
    );
    const after = await waitForTerminal(stack, next.run.id);
    expect(after.status, JSON.stringify(after.error)).toBe('completed');
    // The workspace was cloned again, without what filled it; the conversation went on.
    expect(existsSync(join(workspace, 'big.bin'))).toBe(false);
    expect(existsSync(join(workspace, 'README.md'))).toBe(true);
    const asked = stack.fake.requests.find((r) => r.lastUserText === 'AGAIN, what is here?');
    expect(asked?.userTexts).toContain('FILL the disk');
    const rebuilt = JSON.parse(readFileSync(join(stack.sandboxRoot, first.threadId, 'threadwork.json'), 'utf8'));
    expect(rebuilt.outgrown).toBeUndefined();
  });
});
