import { loadConfig } from '@threadwork/platform';
import { say, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunnerConfig, startRunner } from '../src/index.js';
import { admitRun, alive, harnessesOf, startStack, waitFor, waitForTerminal, type Env, type Stack } from './helpers.js';

// How runs fail: the model answers 500, the harness dies, the run outlives its wall clock, no
// model is configured. Each ends in exactly one terminal `failed` with a code that says why.

const scripts = new Map<string, FakeScript>([
  ['SLOW MODEL', () => ({ items: [say('thinking very slowly')], delayMs: 30_000 })],
]);

describe('failing runs', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  async function restartRunner(env: Env): Promise<void> {
    await stack.runner.stop();
    stack.runner = await startRunner(loadConfig(RunnerConfig, { ...stack.runnerEnv(), ...env }));
  }

  it('fails the run with harness_timeout past RUN_TIMEOUT_MS, and stops the harness', async () => {
    await restartRunner({ RUN_TIMEOUT_MS: '1500' });
    const admitted = await admitRun(stack, 'SLOW MODEL forever');
    // The wall clock may run out anywhere — before the harness has even asked the model on a busy
    // machine — so every harness the run had is noted while it lasts, and each must be gone after.
    const harnesses = new Set<number>();
    let ended = false;
    const watching = (async () => {
      while (!ended) {
        const pid = stack.runner.harnessPids().get(admitted.threadId);
        if (pid !== undefined) harnesses.add(pid);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const run = await waitForTerminal(stack, admitted.run.id);
    ended = true;
    await watching;
    expect(run.status).toBe('failed');
    expect(run.error?.code).toBe('harness_timeout');
    for (const pid of harnesses) await waitFor('the harness to exit', () => !alive(pid));
    await waitFor(
      'no process of the run’s harness to be left',
      () => harnessesOf(stack.sandboxRoot, admitted.threadId).length === 0,
    );
  });

  it('fails fast with model_not_configured without MODEL_BASE_URL and without demo mode', async () => {
    await restartRunner({ MODEL_BASE_URL: undefined, MODEL_API_KEY: undefined, THREADWORK_DEMO: '0' });
    const admitted = await admitRun(stack, 'anything at all');
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('failed');
    expect(run.error).toEqual({
      code: 'model_not_configured',
      message:
        'Set MODEL_BASE_URL (an OpenAI-compatible Responses endpoint) and MODEL_API_KEY, or start with THREADWORK_DEMO=1',
    });
  });
});
