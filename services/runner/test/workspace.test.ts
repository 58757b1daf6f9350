import { spawnSync } from 'node:child_process';
import { readFileSync, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CandidateProducedEvent, MessageCompletedEvent } from '@threadwork/contracts';
import { addFile, say, shell, turnScript, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admitRun,
  alive,
  chunks,
  domainOf,
  filesUnder,
  git,
  isSubsequence,
  MODEL_KEY,
  readLog,
  shape,
  startStack,
  waitFor,
  waitForTerminal,
  type Admitted,
  type Stack,
} from './helpers.js';

// A run end to end with the real codex binary against the fake model: events in order, the
// workspace committed on the thread branch, the candidate reported, the reply stored; then a second
// run of the same thread continuing in the same workspace.

const scripts = new Map<string, FakeScript>([
  [
    'CREATE',
    turnScript([
      [say('Looking around first.'), shell('echo hello from the agent; env; ls')],
      [addFile('src/new.txt', 'hi\nthere\n')],
      [shell("printf 'appended by the agent\\n' >> README.md")],
      [say('Done: created src/new.txt and appended a line to README.md.')],
    ]),
  ],
  ['AFTER IDLE', turnScript([[say('Back after a nap.')]])],
  [
    'FOLLOW UP',
    turnScript([
      [shell('cat src/new.txt && printf "more\\n" >> src/new.txt && stat -c "git directory %i" .git')],
      [say('The file from the first run is still here.')],
    ]),
  ],
]);

/**
 * Long enough for the follow-up to find the harness still up however slowly a loaded machine gets
 * from the first run's end to the follow-up's claim (a few seconds), short enough to wait for.
 */
const IDLE_MS = 20_000;

describe('a run in a workspace', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts, { runner: { SANDBOX_IDLE_MS: String(IDLE_MS) } });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  let first: Admitted | undefined;
  let harnessPid: number | undefined;
  let threadId = '';
  let workspace = '';

  it('creates and edits files: run completed, events in order, candidate = git diff, usage recorded', async () => {
    const admitted = await admitRun(stack, 'CREATE two files please');
    first = admitted;
    threadId = admitted.threadId;
    const owner = admitted.owner;
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('completed');
    expect(run.error).toBeNull();
    expect(run.usage?.inputTokens).toBeGreaterThan(0);
    expect(run.usage?.outputTokens).toBeGreaterThan(0);
    expect(run.usage?.totalTokens).toBe((run.usage?.inputTokens ?? 0) + (run.usage?.outputTokens ?? 0));
    expect(run.sandbox_id).toMatch(/^sbx_/);

    const events = await readLog(stack.nc, run.id);
    const log = shape(events);
    expect(
      isSubsequence(log, [
        'run.status:queued',
        'run.status:starting',
        'run.status:running',
        'command.started',
        'command.output',
        'command.completed',
        'file.changed',
        'message.delta',
        'message.completed',
        'usage',
        'run.status:completed',
      ]),
    ).toBe(true);
    expect(log.at(-1)).toBe('run.status:completed');
    expect(log.filter((t) => t === 'run.status:completed')).toHaveLength(1);
    const sequences = events.map((e) => e.sequence);
    expect(sequences).toEqual([...sequences].sort((a, b) => a - b));
    expect(new Set(sequences).size).toBe(sequences.length);

    const c = chunks(events);
    expect(c.find((x) => x.type === 'file.changed')).toMatchObject({ path: 'src/new.txt', kind: 'added' });
    expect(c.find((x) => x.type === 'command.completed')).toMatchObject({ exit_code: 0 });
    const output = c
      .filter((x) => x.type === 'command.output')
      .map((x) => String(x.delta))
      .join('');
    expect(output).toContain('hello from the agent');
    const lastUsage = c.filter((x) => x.type === 'usage').at(-1);
    expect(lastUsage).toMatchObject(run.usage ?? {});
    expect(c.filter((x) => x.type === 'message.completed').map((x) => x.text)).toContain(
      'Done: created src/new.txt and appended a line to README.md.',
    );
    // No raw harness payloads unless EVENTS_INCLUDE_RAW.
    expect(c.some((x) => 'raw' in x)).toBe(false);

    // The model key never reaches the events, nor the agent's commands (`env` ran above), nor the sandbox's files.
    expect(JSON.stringify(events)).not.toContain(MODEL_KEY);
    const sandboxDir = join(stack.sandboxRoot, threadId);
    for (const file of filesUnder(sandboxDir)) {
      expect(readFileSync(file).includes(MODEL_KEY), file).toBe(false);
    }

    // The workspace is committed on the thread branch, and the candidate is exactly what git says.
    workspace = join(sandboxDir, 'app');
    expect(git(workspace, 'rev-parse', '--abbrev-ref', 'HEAD').trim()).toBe(`threadwork/${threadId}`);
    expect(git(workspace, 'status', '--porcelain').trim()).toBe('');
    expect(git(workspace, 'log', '-1', '--format=%an').trim()).toBe('Threadwork');
    const [candidateEvent] = domainOf(stack, 'candidate.produced', run.id);
    const candidate = CandidateProducedEvent.parse(candidateEvent?.data);
    const head = git(workspace, 'rev-parse', 'HEAD').trim();
    const base = git(workspace, 'rev-parse', 'origin/main').trim();
    expect(candidate).toMatchObject({
      thread_id: threadId,
      owner_id: owner,
      repository_id: 7,
      branch: `threadwork/${threadId}`,
      base_branch: 'main',
      base_revision: base,
      candidate_revision: head,
      truncated: false,
      stats: { additions: 3, deletions: 0 },
    });
    expect(candidate.diff).toBe(git(workspace, 'diff', '--no-color', '-M', base, head));
    expect(candidate.files).toEqual([
      { path: 'README.md', status: 'modified' },
      { path: 'src/new.txt', status: 'added' },
    ]);
    expect(git(workspace, 'diff', '--numstat', base, head).trim().split('\n')).toHaveLength(2);
    // The thread branch is published to the repository it came from (here a local bare repository).
    const origin = git(workspace, 'remote', 'get-url', 'origin')
      .trim()
      .replace(/^file:\/\//, '');
    expect(git(origin, 'rev-parse', `refs/heads/threadwork/${threadId}`).trim()).toBe(head);

    // The reply is published for the threads service to store; the sandbox went initializing → ready.
    const reply = MessageCompletedEvent.parse(domainOf(stack, 'message.completed', run.id)[0]?.data);
    expect(reply.text).toBe('Done: created src/new.txt and appended a line to README.md.');
    expect(domainOf(stack, 'sandbox.status', threadId).map((e) => e.data.status)).toEqual(['initializing', 'ready']);
  });

  it('belongs, where the runner runs as root, to a uid of the sandbox’s own, but for the runner’s state', async (ctx) => {
    if (process.getuid?.() !== 0 || !workspace) ctx.skip();
    const sandboxDir = join(stack.sandboxRoot, threadId);
    const { uid } = JSON.parse(readFileSync(join(sandboxDir, 'threadwork.json'), 'utf8')) as { uid: number };
    // SANDBOX_UID_RANGE's default, less its last (the probes').
    expect(uid).toBeGreaterThanOrEqual(200000);
    expect(uid).toBeLessThan(265535);
    // What the agent made, what the runner checked out for it, the agent's repository, its homes.
    for (const path of ['src/new.txt', 'README.md', '.git/HEAD', '.git/index', '.'].map((p) => join(workspace, p))) {
      expect([statSync(path).uid, statSync(path).gid], path).toEqual([uid, uid]);
    }
    for (const dir of ['codex-home', 'home']) expect(statSync(join(sandboxDir, dir)).uid).toBe(uid);
    // The runner's own state stays root's, out of that uid's reach (as if the agent got out of its
    // jail); only the objects its repository borrows are readable.
    expect(statSync(join(sandboxDir, 'threadwork.json')).uid).toBe(0);
    const as = (...command: string[]) =>
      spawnSync(
        '/usr/bin/setpriv',
        ['--reuid', String(uid), '--regid', String(uid), '--clear-groups', '--', ...command],
        {
          cwd: '/',
          env: { PATH: '/usr/bin:/bin', HOME: '/nonexistent' },
        },
      ).status === 0;
    expect(as('cat', join(sandboxDir, 'threadwork.json'))).toBe(false);
    expect(as('ls', sandboxDir)).toBe(false);
    expect(as('ls', join(sandboxDir, 'takes'))).toBe(false);
    expect(as('ls', join(sandboxDir, 'git', 'app.git'))).toBe(false);
    for (const file of ['HEAD', 'config', 'index', 'refs/heads/threadwork']) {
      expect(as('cat', join(sandboxDir, 'git', 'app.git', file)), file).toBe(false);
    }
    expect(as('git', '-C', workspace, 'log', '--oneline', '-1')).toBe(true);
    expect(as('touch', join(workspace, 'src', 'new.txt'))).toBe(true);
    // No other sandbox's uid passes through its folder.
    expect(
      spawnSync('/usr/bin/setpriv', [
        '--reuid',
        String(uid + 1),
        '--regid',
        String(uid + 1),
        '--clear-groups',
        '--',
        'ls',
        workspace,
      ]).status,
    ).not.toBe(0);
  });

  it('continues a second run of the same thread in the same workspace', async () => {
    if (!first) throw new Error('the first run did not happen');
    const { owner_id, project_id, repositories } = first.request;
    harnessPid = stack.runner.harnessPids().get(threadId);
    expect(harnessPid).toBeDefined();
    // The agent's repository the first run's report made: nothing of the agent has run since.
    const gitDir = statSync(join(workspace, '.git')).ino;
    const admitted = await admitRun(stack, 'FOLLOW UP on the file', {
      thread_id: threadId,
      owner_id,
      project_id,
      repositories,
    });
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('completed');
    const output = chunks(await readLog(stack.nc, run.id))
      .filter((x) => x.type === 'command.output')
      .map((x) => String(x.delta))
      .join('');
    expect(output).toContain('hi\nthere');
    // The turn found it as it was made, not made again.
    expect(output).toContain(`git directory ${gitDir}`);
    expect(readFileSync(join(workspace, 'src/new.txt'), 'utf8')).toBe('hi\nthere\nmore\n');
    // One commit per run on the thread branch.
    expect(git(workspace, 'rev-list', '--count', 'origin/main..HEAD').trim()).toBe('2');
    // The model saw the first run's conversation: the same Codex thread was continued.
    const last = stack.fake.requests.at(-1);
    expect(last?.userTexts).toEqual(['CREATE two files please', 'FOLLOW UP on the file']);
    const candidate = CandidateProducedEvent.parse(domainOf(stack, 'candidate.produced', run.id)[0]?.data);
    expect(candidate.files).toEqual([
      { path: 'README.md', status: 'modified' },
      { path: 'src/new.txt', status: 'added' },
    ]);
    expect(existsSync(join(workspace, 'README.md'))).toBe(true);
    // The same harness process served both runs.
    expect(stack.runner.harnessPids().get(threadId)).toBe(harnessPid);
  });

  it('stops an idle sandbox’s harness, and the next run resumes the conversation in a new one', async () => {
    if (!first || harnessPid === undefined) throw new Error('the earlier runs did not happen');
    await waitFor('the sandbox to be reported stopped', () =>
      domainOf(stack, 'sandbox.status', threadId).some((e) => e.data.status === 'stopped'),
    );
    expect(alive(harnessPid)).toBe(false);
    expect(stack.runner.harnessPids().has(threadId)).toBe(false);

    const { owner_id, project_id, repositories } = first.request;
    const admitted = await admitRun(stack, 'AFTER IDLE, anything new?', {
      thread_id: threadId,
      owner_id,
      project_id,
      repositories,
    });
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('completed');
    expect(stack.fake.requests.at(-1)?.userTexts).toEqual([
      'CREATE two files please',
      'FOLLOW UP on the file',
      'AFTER IDLE, anything new?',
    ]);
    // The follow-up found the sandbox ready as the first run left it, and said nothing of it.
    expect(domainOf(stack, 'sandbox.status', threadId).map((e) => e.data.status)).toEqual([
      'initializing',
      'ready',
      'stopped',
      'initializing',
      'ready',
    ]);
  });
});
