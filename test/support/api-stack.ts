// The API stack the end-to-end tests of the public API share: alice, bob and one repository.
import { Run, ThreadWithRun } from '@threadwork/contracts';
import { afterAll, beforeAll } from 'vitest';
import { startStack, type Stack, type TestUser } from './stack.js';
import { json } from './http.js';

export let stack: Stack;
export let alice: TestUser;
export let bob: TestUser;
export let repoId: number;

/** Starts the stack for this test file; call once at its top. */
export function useApiStack(): void {
  beforeAll(async () => {
    stack = await startStack();
    [alice, bob] = await Promise.all([stack.createUser('alice'), stack.createUser('bob')]);
    repoId = await stack.addRepo('widgets', { branch: 'trunk' });
  });
  afterAll(async () => {
    await stack?.stop();
  });
}

export function post(path: string, user: TestUser, body: unknown) {
  return stack.fetch(path, { method: 'POST', user, body: JSON.stringify(body) });
}

export async function createThread(user: TestUser, body: Record<string, unknown> = {}) {
  return json(
    await post('/v1/threads', user, { repository_id: repoId, prompt: 'Add a changelog', ...body }),
    202,
    ThreadWithRun,
  );
}

export async function runOf(user: TestUser, runId: string) {
  return json(await stack.fetch(`/v1/runs/${runId}`, { user }), 200, Run);
}
