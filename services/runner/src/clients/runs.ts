import { rpc, type AttemptState } from '@threadwork/contracts';
import type { NatsConnection } from '@threadwork/platform';
import type { z } from 'zod';
import { callService } from './call.js';

// The runner's reads of the runs service about the attempt it holds.

/** One attempt of a run, as its claim made it: what the runner reads the run by. */
export interface AttemptRef {
  run_id: string;
  attempt: number;
  claim_id: string;
}

/**
 * Where the run of `ref` stands now, read by its claim (the runner reads no run for an owner).
 * `retryForMs` 0 asks once.
 */
export function readAttempt(
  nc: NatsConnection,
  ref: AttemptRef,
  retryForMs?: number,
): Promise<z.output<typeof AttemptState>> {
  const req = { run_id: ref.run_id, attempt: ref.attempt, claim_id: ref.claim_id };
  return callService(nc, rpc.runs.attemptState, req, retryForMs);
}

/** Whether a run is live at `attempt`, as the runs service sees it now (a newer attempt fences an older one out). */
export async function attemptHolds(nc: NatsConnection, ref: AttemptRef): Promise<boolean> {
  const run = await readAttempt(nc, ref);
  return run.attempt === ref.attempt && !run.terminal;
}
