import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { CandidateProducedEvent } from '@threadwork/contracts';
import { addFile, say, shell, turnScript, uniqueId, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitRun, domainOf, git, startStack, waitForTerminal, type Stack } from './helpers.js';

// A project started in a repository that has no commits yet: the thread branch starts from an
// empty tree, its first commit is the repository's first, and the default branch stays absent.

const scripts = new Map<string, FakeScript>([
  ['START', turnScript([[addFile('README.md', '# Fresh\n')], [say('Started the project.')]])],
  ['MORE', turnScript([[shell("printf 'more\\n' >> README.md")], [say('Added a line.')]])],
  ['NOTHING', turnScript([[say('Nothing to change.')]])],
]);

describe('a thread in an empty repository', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  function emptyBareRepo(): string {
    const dir = join(stack.dir, 'repos', `${uniqueId('empty')}.git`);
    mkdirSync(dir, { recursive: true });
    execFileSync('git', ['init', '--quiet', '--bare', '--initial-branch=main', dir]);
    return dir;
  }

  it('completes, its first candidate adding the files, pushed to the thread branch only; a follow-up continues', async () => {
    const bare = emptyBareRepo();
    const first = await admitRun(stack, 'START a project', {}, bare);
    const run = await waitForTerminal(stack, first.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');

    const [produced] = domainOf(stack, 'candidate.produced', run.id).map((e) => CandidateProducedEvent.parse(e.data));
    expect(produced).toBeDefined();
    expect(produced!.files).toEqual([{ path: 'README.md', status: 'added' }]);
    expect(produced!.diff).toContain('+# Fresh');
    expect(produced!.stats).toMatchObject({ additions: 1, deletions: 0 });

    // The thread branch holds one root commit with the file; the default branch was never made.
    const branch = `threadwork/${first.threadId}`;
    expect(git(bare, 'rev-list', '--count', branch).trim()).toBe('1');
    expect(git(bare, 'show', `${branch}:README.md`)).toBe('# Fresh\n');
    expect(git(bare, 'for-each-ref', '--format=%(refname)').trim().split('\n')).toEqual([`refs/heads/${branch}`]);

    const follow = await admitRun(
      stack,
      'MORE please',
      {
        thread_id: first.threadId,
        owner_id: first.owner,
        project_id: first.request.project_id,
        repositories: first.request.repositories,
      },
      bare,
    );
    expect((await waitForTerminal(stack, follow.run.id)).status).toBe('completed');
    expect(git(bare, 'show', `${branch}:README.md`)).toBe('# Fresh\nmore\n');
    const [second] = domainOf(stack, 'candidate.produced', follow.run.id).map((e) =>
      CandidateProducedEvent.parse(e.data),
    );
    // Still diffed against the empty start: the thread's whole work so far.
    expect(second!.diff).toContain('+# Fresh');
    expect(second!.diff).toContain('+more');
  });

  it('completes a run that changes nothing, on an empty commit of its own', async () => {
    const bare = emptyBareRepo();
    const admitted = await admitRun(stack, 'NOTHING to do', {}, bare);
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');
    const [produced] = domainOf(stack, 'candidate.produced', run.id).map((e) => CandidateProducedEvent.parse(e.data));
    expect(produced).toMatchObject({ files: [], diff: '' });
  });
});
