import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { STREAM_NAMES } from '@threadwork/contracts';
import { jetStreamOf } from '@threadwork/platform';
import { createBareRepo, say, shell, uniqueId, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitRun, startStack, waitForTerminal, type Stack } from './helpers.js';

// What a run does when JetStream refuses its report: its candidate is the event review and the
// thread show, so a run whose candidate could not be published does not say it completed.

const scripts = new Map<string, FakeScript>([
  [
    'LARGE',
    (req) =>
      req.toolOutputsSinceLastUser.length > 0
        ? [say('Written.')]
        : [shell("head -c 40000 /dev/zero | tr '\\0' a > large.txt")],
  ],
]);

describe('a run whose report JetStream refuses', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('fails report_not_published, its work pushed, and announces no candidate', async () => {
    // A real refusal: DOMAIN takes no message larger than 8 KiB, so the status events still go
    // through and the candidate, carrying a 40 KB diff, does not.
    const { jsm } = await jetStreamOf(stack.nc);
    const { config } = await jsm.streams.info(STREAM_NAMES.domain);
    await jsm.streams.update(STREAM_NAMES.domain, { ...config, max_msg_size: 8192 });
    try {
      const bare = createBareRepo(join(stack.dir, 'repos'), uniqueId('large'), { files: { 'README.md': '# App\n' } });
      const threadId = uniqueId('thr_');
      const admitted = await admitRun(stack, 'LARGE file', { thread_id: threadId }, bare);
      const run = await waitForTerminal(stack, admitted.run.id);

      expect(run.status).toBe('failed');
      expect(run.error?.code).toBe('report_not_published');
      expect(run.error?.message).toContain('candidate.produced');
      const pushed = execFileSync('git', ['--git-dir', bare, 'show', `threadwork/${threadId}:large.txt`], {
        encoding: 'utf8',
      });
      expect(pushed.length).toBe(40_000);
      // Core subscribers hear the refused publish go by; the stream, which the services read, kept none.
      const stored = await jsm.streams.info(STREAM_NAMES.domain, { subjects_filter: 'evt.runner.candidate.>' });
      expect(stored.state.subjects ?? {}).toEqual({});
    } finally {
      await jsm.streams.update(STREAM_NAMES.domain, config);
    }
  });
});
