import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createBareRepo, say, shell, uniqueId, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitRun, startStack, waitForTerminal, type Stack } from './helpers.js';

// Where a run's work goes: the thread branch of the repository the job names, pushed with a lease
// on the revision the branch had when the run began.

/** Commits a file onto a branch of a bare repository, as someone else pushing would. */
function pushElsewhere(bare: string, branch: string, file: string): string {
  const work = mkdtempSync(join(tmpdir(), 'threadwork-other-'));
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: work, encoding: 'utf8' });
    git('clone', '-q', bare, '.');
    git('checkout', '-q', '-B', branch);
    writeFileSync(join(work, file), 'pushed by someone else\n');
    git('add', file);
    git('-c', 'user.name=Other', '-c', 'user.email=other@example.com', 'commit', '-q', '-m', 'elsewhere');
    git('push', '-q', 'origin', `HEAD:refs/heads/${branch}`);
    return git('rev-parse', 'HEAD').trim();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

let raced: { bare: string; threadId: string; pushed: string | null } | null = null;

const scripts = new Map<string, FakeScript>([
  [
    'RACED',
    (req) => {
      if (req.toolOutputsSinceLastUser.length > 0) return [say('Done.')];
      // The sandbox is ready and the run under way: the thread branch moves on the remote now.
      if (raced && raced.pushed === null)
        raced.pushed = pushElsewhere(raced.bare, `threadwork/${raced.threadId}`, 'other.txt');
      return [shell('echo mine > mine.txt')];
    },
  ],
]);

describe('the push of a thread branch', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('reads a branch that moved on the remote during the run again, and still publishes the run’s work', async () => {
    const bare = createBareRepo(join(stack.dir, 'repos'), uniqueId('raced'), { files: { 'README.md': '# App\n' } });
    const threadId = uniqueId('thr_');
    raced = { bare, threadId, pushed: null };
    const admitted = await admitRun(stack, 'RACED push', { thread_id: threadId }, bare);
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');
    expect(raced.pushed).not.toBeNull();

    const show = (what: string) => execFileSync('git', ['--git-dir', bare, 'show', what], { encoding: 'utf8' });
    const head = execFileSync('git', ['--git-dir', bare, 'rev-parse', `threadwork/${threadId}`], { encoding: 'utf8' });
    expect(head.trim()).not.toBe(raced.pushed);
    expect(show(`threadwork/${threadId}:mine.txt`)).toBe('mine\n');
  });
});
