import { CONSUMERS, rpc, STREAM_NAMES } from '@threadwork/contracts';
import { jetStreamOf, loadConfig, request } from '@threadwork/platform';
import { newClaimId, say, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunnerConfig, startRunner } from '../src/index.js';
import { admitRun, getRun, startStack, waitFor, waitForTerminal, type Stack } from './helpers.js';

// A run's job delivered to a runner while another runner holds the run and is heard from (its
// lease holds): the claim is refused, and the runner must neither take the run nor lose the job. It
// hands the job back for as long as it was told, and claims the run once the holder fell silent.

const ACK_WAIT_MS = '2000';

const scripts = new Map<string, FakeScript>([['LEASE', () => [say('Done once the holder went quiet.')]]]);

describe('a job whose run another runner holds', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts, { runs: { JOB_ACK_WAIT_MS: ACK_WAIT_MS } });
    // The holder below claims the run first; the runner is started once it holds it.
    await stack.runner.stop();
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('is handed back while the holder is heard from, and taken once the holder fell silent', async () => {
    const admitted = await admitRun(stack, 'LEASE held by another runner');
    const runId = admitted.run.id;
    // The holder: claims the run (before its turn began) and polls it, as a live runner does.
    const claim_id = newClaimId();
    const claimed = await request(stack.nc, rpc.runs.claim, { run_id: runId, runner_id: 'holder', claim_id });
    expect(claimed).toMatchObject({ attempt: 0, run: { status: 'starting' } });
    const poll = () => request(stack.nc, rpc.runs.attemptState, { run_id: runId, attempt: 0, claim_id });
    const heartbeat = setInterval(() => void poll().catch(() => undefined), 200);
    try {
      stack.runner = await startRunner(loadConfig(RunnerConfig, stack.runnerEnv()));
      // The runner takes the job, is refused and hands it back; it comes again and is refused again.
      const { jsm } = await jetStreamOf(stack.nc);
      const consumer = CONSUMERS.runner('codex');
      await waitFor('the job to be delivered again after a refused claim', async () => {
        const info = await jsm.consumers.info(STREAM_NAMES.runJobs, consumer);
        return info.num_redelivered >= 1 && info.num_ack_pending + info.num_pending >= 1;
      });
      expect(await getRun(stack, runId)).toMatchObject({ status: 'starting', attempt: 0 });
    } finally {
      clearInterval(heartbeat);
    }

    // The holder is silent now (as if killed): the job's next delivery claims the run and finishes it.
    const run = await waitForTerminal(stack, runId);
    expect(run).toMatchObject({ status: 'completed', attempt: 1 });
    const { jsm } = await jetStreamOf(stack.nc);
    await waitFor('the job to be acked', async () => {
      const info = await jsm.consumers.info(STREAM_NAMES.runJobs, CONSUMERS.runner('codex'));
      return info.num_ack_pending === 0 && info.num_pending === 0;
    });
  });
});
