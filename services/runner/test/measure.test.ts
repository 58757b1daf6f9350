import { say, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { residentMemory } from '../src/harness/processes.js';
import { admitRun, readLog, startStack, waitForTerminal, type Stack } from './helpers.js';

// Latency of a trivial scripted turn (admit → first harness event, admit → completed), cold (clone
// + a new codex process) and warm (the thread's codex process still up), and the memory a live
// sandbox costs: the codex process's resident set plus the runner's own growth. Printed for the
// record; what is asserted is that the runs complete and each thread keeps its own live harness.
// Latency targets live in `npm run bench`, against a baseline measured in the same run.

const scripts = new Map<string, FakeScript>([['TRIVIAL', () => [say('ok')]]]);

const mib = (bytes: number | null) => (bytes === null ? 'n/a' : `${(bytes / 1024 / 1024).toFixed(1)} MiB`);

describe('measurements', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts, { runner: { RUNNER_CONCURRENCY: '4' } });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  async function timedRun(prompt: string, overrides = {}) {
    const admitted = await admitRun(stack, prompt, overrides);
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('completed');
    const events = await readLog(stack.nc, run.id);
    const firstHarness = events.find((e) => !['run.status'].includes((e.chunk as { type: string }).type));
    const done = events.at(-1);
    return {
      admitted,
      toFirstEvent: Date.parse(firstHarness?.created_at ?? '') - admitted.admittedAt,
      toCompleted: Date.parse(done?.created_at ?? '') - admitted.admittedAt,
    };
  }

  it('times a trivial turn and weighs a live sandbox', async () => {
    const rssBefore = process.memoryUsage().rss;
    const cold = await timedRun('TRIVIAL cold');
    const { owner_id, project_id, repositories } = cold.admitted.request;
    const warm = await timedRun('TRIVIAL warm', {
      thread_id: cold.admitted.threadId,
      owner_id,
      project_id,
      repositories,
    });
    for (const i of [1, 2]) await timedRun(`TRIVIAL more ${i}`);

    const pids = [...stack.runner.harnessPids().values()];
    expect(pids).toHaveLength(3);
    const codexMemory = pids.map(residentMemory);
    const rssAfter = process.memoryUsage().rss;
    const report = {
      cold: { admit_to_first_event_ms: cold.toFirstEvent, admit_to_completed_ms: cold.toCompleted },
      warm: { admit_to_first_event_ms: warm.toFirstEvent, admit_to_completed_ms: warm.toCompleted },
      codex_rss_per_live_sandbox: codexMemory.map((m) => mib(m?.rss ?? null)),
      codex_anonymous_rss_per_live_sandbox: codexMemory.map((m) => mib(m?.anon ?? null)),
      test_process_rss_growth_for_3_sandboxes: mib(rssAfter - rssBefore),
      test_process_rss: mib(rssAfter),
    };
    process.stdout.write(`runner measurements: ${JSON.stringify(report, null, 2)}\n`);
  });
});
