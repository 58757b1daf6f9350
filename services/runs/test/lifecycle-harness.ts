import { rpc } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { afterAll, beforeAll } from 'vitest';
import { admission, startHarness, type Harness } from './helpers.js';

/**
 * The runs service the lifecycle tests of one file share, started before them and stopped after.
 * Three attempts, so a test can see a run's attempts run out. The harness is filled in once the
 * service is up, so the tests can hold it from the start.
 */
export function lifecycleHarness(env: Record<string, string> = {}): Harness {
  const h = {} as Harness;
  let started: Harness | undefined;
  beforeAll(async () => {
    started = await startHarness({ RUN_MAX_ATTEMPTS: '3', ...env });
    Object.assign(h, started);
  });
  afterAll(async () => {
    await started?.stop();
  });
  return h;
}

/** Admits a run no runner has claimed yet, where each lifecycle starts. */
export async function admitRun(h: Harness) {
  const req = admission();
  const { run } = await request(h.nc, rpc.runs.admit, req);
  return { run, owner: req.owner_id, thread_id: req.thread_id };
}
