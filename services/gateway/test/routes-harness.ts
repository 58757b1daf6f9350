// The gateway's harness as the route tests use it: two callers, two repositories, and requests as either.
import { RunDriver } from '@threadwork/testing';
import { afterAll, beforeAll } from 'vitest';
import { startHarness, type App, type Caller, type Harness } from './harness.js';

export let harness: Harness;
export let app: App;
export let alice: Caller;
export let bob: Caller;

/** Starts the gateway's harness with repositories alpha and beta, and callers alice and bob; call inside the file's describe. */
export function useRoutesHarness(): void {
  beforeAll(async () => {
    harness = await startHarness({ repositories: ['alpha', 'beta'] });
    app = harness.app;
    alice = await harness.caller();
    bob = await harness.caller();
  });
  afterAll(async () => {
    await harness?.close();
  });
}

export const get = (url: string, who: Caller = alice, headers: Record<string, string> = {}) =>
  app.inject({ url, headers: { ...who.headers, ...headers } });
export const post = (url: string, payload?: unknown, who: Caller = alice) =>
  app.inject({
    method: 'POST',
    url,
    headers: who.headers,
    ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
  });

export const alpha = () => harness.repositories.get('alpha')!;
export const beta = () => harness.repositories.get('beta')!;

/** A run admitted by the gateway's answer, taken through to completion as a runner would. */
export const complete = async (runId: string) => {
  const driver = await (await RunDriver.claim(harness.nc, runId)).start();
  await driver.to('completed');
};
