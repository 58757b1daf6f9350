import { randomBytes } from 'node:crypto';
// Runs the benchmarks write events to themselves, standing in for a runner.
import { rpc } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { api } from './stack.mjs';

/**
 * No runner takes jobs of this harness (the runner consumes only those it serves), so a run admitted with it
 * stays queued until we claim it.
 */
const UNSERVED_HARNESS = 'bench';

/**
 * A thread opened through the public API whose run we hold as its runner would: claimed and
 * `running`, so events can be appended with the returned attempt and claim id.
 */
export async function createHeldRun(stack, prompt) {
  const created = await api(stack, 'POST', '/v1/threads', {
    repository_id: stack.repositoryId,
    prompt,
    harness: UNSERVED_HARNESS,
  });
  const runId = created.run_id;
  const claimId = `clm_${randomBytes(16).toString('hex')}`;
  const { attempt } = await request(stack.nc, rpc.runs.claim, { run_id: runId, runner_id: 'bench', claim_id: claimId });
  await request(stack.nc, rpc.runs.transition, { run_id: runId, attempt, claim_id: claimId, to: 'starting' });
  await request(stack.nc, rpc.runs.transition, { run_id: runId, attempt, claim_id: claimId, to: 'running' });
  return { runId, threadId: created.id, attempt, claimId };
}

/** A line of build output, the most common event of a real run. */
export function outputChunk(n, extra = {}) {
  return { type: 'command.output', item_id: 'c1', delta: `line ${n} of a long build log\n`, ...extra };
}
