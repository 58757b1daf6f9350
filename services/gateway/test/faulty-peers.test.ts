import { uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULTS } from './faulty-peers.js';
import { startHarness, type Caller, type Harness } from './harness.js';

// The faulty stand-ins (faulty-peers.ts) are held to the real threads and runs services through
// the gateway: for every id but the faults they answer as the real services do for an id that is
// not the caller's, so a test through them differs from one through the real services only where
// it asks for a fault. The cases run through both.

const cases = (): [string, string][] => [
  [`/v1/threads/${uniqueId('thr')}`, 'thread not found'],
  [`/v1/tasks/${uniqueId('thr')}`, 'task not found'],
  [`/v1/runs/${uniqueId('run')}`, 'run not found'],
];

describe.each([
  ['the real services', 'real'],
  ['the faulty stand-ins', 'faulty'],
] as const)('%s', (_name, peers) => {
  let harness: Harness;
  let caller: Caller;

  beforeAll(async () => {
    harness = await startHarness({ peers });
    caller = await harness.caller();
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('answer an id that is not the caller’s 404 not_found', async () => {
    for (const [url, message] of cases()) {
      const res = await harness.app.inject({ url, headers: caller.headers });
      expect(res.statusCode, url).toBe(404);
      expect(res.json()).toEqual({ error: { code: 'not_found', message } });
    }
  });

  it('differ only at the faults: the real services know nothing of those ids either', async () => {
    for (const id of [FAULTS.boom, FAULTS.internalWithText, FAULTS.malformed]) {
      const res = await harness.app.inject({ url: `/v1/threads/${id}`, headers: caller.headers });
      expect(res.statusCode, id).toBe(peers === 'real' ? 404 : 500);
    }
    // The slow run is not found by either; the stand-in says so late (its fault).
    const slow = await harness.app.inject({ url: `/v1/runs/${FAULTS.slowRun}`, headers: caller.headers });
    expect(slow.statusCode).toBe(404);
  });
});
