import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { say, shell, turnScript, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admitRun,
  chunks,
  domainOf,
  git,
  readLog,
  startStack,
  waitForTerminal,
  type Stack,
  type StackOptions,
} from './helpers.js';

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
  // Unlinked as soon as it is open, then written: no walk of the tree ever sees it, the disk holds it all the same.
  [
    'HOLD',
    turnScript([
      [shell(`exec 3>held.bin && rm held.bin && head -c ${64 * MIB} /dev/zero >&3 && echo held && sleep 60`)],
      [say('held it')],
    ]),
  ],
  // Empty files take no blocks, and exhaust the disk's inodes all the same.
  [
    'FLOOD',
    turnScript([
      [shell('mkdir flood && cd flood && seq 1 5000 | xargs touch && echo flooded && sleep 60')],
      [say('flooded')],
    ]),
  ],
  ['CHOKE', turnScript([[shell('touch du-chokes-here && echo choked && sleep 60')], [say('choked')]])],
  // The measure fails once (as a freeze that a process in a long write outlasts does), then works.
  [
    'HICCUP',
    turnScript([
      [shell(`touch du-hiccups-here && head -c ${64 * MIB} /dev/zero > big.bin && echo filled && sleep 60`)],
      [say('filled')],
    ]),
  ],
]);

/** A stack whose sandboxes are bounded at 32 MiB and 2000 inodes, measured every 200 ms; `options.runner` goes over that. */
const startBoundedStack = ({ runner, ...options }: StackOptions = {}) =>
  startStack(scripts, {
    ...options,
    runner: {
      SANDBOX_DISK_MAX_BYTES: String(32 * MIB),
      SANDBOX_DISK_MAX_INODES: '2000',
      SANDBOX_DISK_CHECK_MS: '200',
      ...runner,
    },
  });

describe('a sandbox past its bound on disk', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startBoundedStack();
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

describe('what a sandbox holds that a walk of its tree does not see', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startBoundedStack({
      runner: {
        // In the jail, whose processes are what holds the file; Codex's sandbox guards the harness
        // there (a required jail needs it, or Yama), and it needs the sandboxes outside /tmp.
        SANDBOX_JAIL: 'required',
        CODEX_SANDBOX_MODE: 'workspace-write',
      },
      parentDir: '/var/tmp',
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('counts a file the agent unlinked and keeps open', async () => {
    const { run } = await admitRun(stack, 'HOLD 64 MiB unlinked');
    const done = await waitForTerminal(stack, run.id);
    const ready = chunks(await readLog(stack.nc, run.id)).find((c) => c.type === 'sandbox.ready');
    expect(ready).toMatchObject({ layers: expect.arrayContaining(['bubblewrap-jail']) });
    expect(done.status, JSON.stringify(done.error)).toBe('failed');
    expect(done.error?.code).toBe('sandbox_disk_full');
    expect(done.error?.message).toContain('SANDBOX_DISK_MAX_BYTES');
    expect(domainOf(stack, 'candidateProduced', run.id)).toEqual([]);
  });

  it('counts files and directories, not only bytes: a flood of empty files stops the run', async () => {
    const { run } = await admitRun(stack, 'FLOOD the inodes');
    const done = await waitForTerminal(stack, run.id);
    expect(done.status, JSON.stringify(done.error)).toBe('failed');
    expect(done.error?.code).toBe('sandbox_disk_full');
    expect(done.error?.message).toContain('SANDBOX_DISK_MAX_INODES');
    expect(domainOf(stack, 'candidateProduced', run.id)).toEqual([]);
  });
});

describe('a sandbox that cannot be measured', () => {
  // `du` is the runner's, found on its PATH: this one fails as du does on a path it chokes on (it
  // prints a total, then exits 1), once the agent has left such a path in its workspace.
  let stack: Stack;
  let bin: string;
  const path = process.env.PATH;
  beforeAll(async () => {
    bin = mkdtempSync(join(tmpdir(), 'threadwork-du-'));
    writeFileSync(
      join(bin, 'du'),
      [
        '#!/bin/sh',
        'for last; do :; done',
        'if [ -n "$(find "$last" -xdev -name du-chokes-here -print -quit 2>/dev/null)" ]; then',
        '  /usr/bin/du "$@"',
        `  echo "du: cannot read directory '$last/app/du-chokes-here': Input/output error" >&2`,
        '  exit 1',
        'fi',
        // Once only: the first measure of a sandbox holding the marker fails, every later one works.
        `if [ ! -e "$(dirname "$0")/hiccuped" ] && [ -n "$(find "$last" -xdev -name du-hiccups-here -print -quit 2>/dev/null)" ]; then`,
        `  touch "$(dirname "$0")/hiccuped"`,
        '  exit 1',
        'fi',
        'exec /usr/bin/du "$@"',
      ].join('\n'),
    );
    chmodSync(join(bin, 'du'), 0o755);
    process.env.PATH = `${bin}:${path}`;
    // Bounded in bytes only: what fails the run is the measure, not an inode count.
    stack = await startBoundedStack({ runner: { SANDBOX_DISK_MAX_INODES: undefined } });
  });
  afterAll(async () => {
    await stack?.stop();
    process.env.PATH = path;
    rmSync(bin, { recursive: true, force: true });
  });

  it('fails its run sandbox_disk_full, as past its bound, when du fails', async () => {
    const { run } = await admitRun(stack, 'CHOKE the measure');
    const done = await waitForTerminal(stack, run.id);
    expect(done.status, JSON.stringify(done.error)).toBe('failed');
    expect(done.error?.code).toBe('sandbox_disk_full');
    expect(done.error?.message).toContain('could not be measured');
    expect(domainOf(stack, 'candidateProduced', run.id)).toEqual([]);
  });

  it('measures again after a failed measure, and fails the run only for what it then finds', async () => {
    const { run } = await admitRun(stack, 'HICCUP the measure');
    const done = await waitForTerminal(stack, run.id);
    expect(existsSync(join(bin, 'hiccuped'))).toBe(true);
    expect(done.status, JSON.stringify(done.error)).toBe('failed');
    expect(done.error?.code).toBe('sandbox_disk_full');
    expect(done.error?.message).toContain('SANDBOX_DISK_MAX_BYTES');
  });
});
