// The GitHub App end to end: the real services in this process, a fake GitHub on loopback (REST,
// JWT-checked, OAuth, real git over HTTP), and the client's side spoken over HTTP to the gateway.
import { jetStreamOf, type JetStreamHandles } from '@threadwork/platform';
import { type FakeGitHub, type FakeRepository } from '@threadwork/testing';
import { afterAll, beforeAll } from 'vitest';
import { startGitHubStack, type GitHubStack } from './github.js';
import type { Stack, TestUser } from './stack.js';

export const SLUG = 'threadwork-e2e';
export const SECRET = 'e2e-webhook-secret';
export const SCHEME = 'twe2e';
export const RETURN_TO = `${SCHEME}://repohost/setup`;

export let gh: GitHubStack;
export let stack: Stack;
export let fake: FakeGitHub;
export let jetstream: JetStreamHandles;
export let alice: TestUser;
export let bob: TestUser;
export let widgets: FakeRepository;

/** Starts the stack and the fake GitHub with alice's and bob's accounts; call once at the top of a test file. */
export function useGitHubStack(): void {
  beforeAll(async () => {
    gh = await startGitHubStack(
      {
        appId: 777,
        slug: SLUG,
        webhookSecret: SECRET,
        scheme: SCHEME,
        oauth: { clientId: 'Iv1.e2e', clientSecret: 'e2e-client-secret' },
      },
      // Publications move by webhooks in these tests, not by syncs on read.
      { PUBLICATION_SYNC_MS: String(60 * 60_000) },
    );
    ({ stack, fake } = gh);
    widgets = fake.addRepository('alice-gh', 'widgets', { branch: 'trunk', files: { 'README.md': '# widgets\n' } });
    fake.addRepository('bob-gh', 'bobs-repo');
    jetstream = await jetStreamOf(stack.nc);
    [alice, bob] = await Promise.all([stack.createUser('gh-alice'), stack.createUser('gh-bob')]);
  });

  afterAll(async () => {
    await gh?.stop();
  });
}

export const post = (path: string, user: TestUser, body: unknown) =>
  stack.fetch(path, { method: 'POST', user, body: JSON.stringify(body) });
