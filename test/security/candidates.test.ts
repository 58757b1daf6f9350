import { CONSUMERS, ThreadWithRun, WorkList, domainEvents } from '@threadwork/contracts';
import {
  connectNats,
  createLogger,
  jetStreamOf,
  natsAuthWithSeed,
  publishJson,
  type JetStreamClient,
  type NatsConnection,
} from '@threadwork/platform';
import {
  candidateProduced,
  pushAsRunner,
  RunDriver,
  uniqueId,
  type FakeGitHub,
  type FakeRepository,
  domainHandled,
  waitFor,
} from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { linkInstallation, startGitHubStack, type GitHubStack } from '../support/github.js';
import type { Stack, TestUser } from '../support/stack.js';

// repohost opens and updates pull requests on a user's repositories, with their installation's
// token, from `evt.runner.candidate.produced`, which anyone holding the runner's NATS key can
// publish. Played here with the runner's own key against the real services and a fake GitHub: a
// candidate counts only when the holder of its run attested it and the run is the event's thread,
// owner and repository.

const hasBinary = Boolean(inject('natsServerBin'));
const APP = {
  appId: 778,
  slug: 'threadwork-candidates',
  webhookSecret: 'candidates-webhook-secret',
  scheme: 'twcand',
  oauth: { clientId: 'Iv1.cand', clientSecret: 'cand-client-secret' },
};

let gh: GitHubStack;
let stack: Stack;
let fake: FakeGitHub;
let runnerKey: NatsConnection;
let js: JetStreamClient;
let alice: TestUser;
let bob: TestUser;
let widgets: FakeRepository;
let bobsRepo: FakeRepository;

async function json<T>(res: Response, status: number, schema: { parse(v: unknown): T }): Promise<T> {
  const text = await res.text();
  expect(res.status, text).toBe(status);
  return schema.parse(JSON.parse(text));
}

/** A thread of `user` on `repo`, its run claimed and running by a runner with the runner's key. */
async function heldThread(user: TestUser, repo: FakeRepository) {
  const thread = await json(
    await stack.fetch('/v1/threads', {
      method: 'POST',
      user,
      body: JSON.stringify({ repository_id: repo.id, prompt: 'Write the changelog' }),
    }),
    202,
    ThreadWithRun,
  );
  const work = await json(await stack.fetch('/v1/work', { user }), 200, WorkList);
  const project = work.projects.find((p) => p.threads.some((t) => t.id === thread.id))!;
  const holder = await RunDriver.claim(runnerKey, thread.run_id);
  await holder.start();
  return { thread, holder, projectRepositoryId: project.repositories[0]!.id };
}

/** Waits until repohost has handled every DOMAIN event up to `seq` (acted on it, or ignored it). */
async function repohostHandled(seq: number): Promise<void> {
  await domainHandled((await jetStreamOf(stack.nc)).jsm, CONSUMERS.repohost, seq);
}

const CANDIDATE = domainEvents.candidateProduced.subject;

describe.skipIf(!hasBinary)('candidates repohost publishes', () => {
  beforeAll(async () => {
    gh = await startGitHubStack(APP, { PUBLICATION_SYNC_MS: String(60 * 60_000) });
    ({ stack, fake } = gh);
    widgets = fake.addRepository('alice-gh', 'widgets', { branch: 'trunk', files: { 'README.md': '# widgets\n' } });
    bobsRepo = fake.addRepository('bob-gh', 'gizmos', { branch: 'trunk', files: { 'README.md': '# gizmos\n' } });
    [alice, bob] = await Promise.all([stack.createUser('cand-alice'), stack.createUser('cand-bob')]);
    await linkInstallation(gh, alice, 'alice-gh');
    await linkInstallation(gh, bob, 'bob-gh');
    runnerKey = await connectNats({
      servers: stack.nats.url,
      name: 'as-runner',
      logger: createLogger({ service: 'candidates-test', level: 'silent' }),
      auth: natsAuthWithSeed(stack.nats.keys!.runner.seed, 'runner'),
    });
    ({ js } = await jetStreamOf(runnerKey));
  });
  afterAll(async () => {
    await runnerKey?.close();
    await gh?.stop();
  });

  it('opens no pull request for a candidate its run’s holder did not produce, and one for the holder’s', async () => {
    const { thread, holder, projectRepositoryId } = await heldThread(alice, widgets);
    const branch = `threadwork/${thread.id}`;
    // The runner's part: a token for the run's repository, the thread branch pushed.
    const pushed = await pushAsRunner(runnerKey, fake, {
      run_id: thread.run_id,
      claim_id: holder.claimId,
      repository: widgets,
      branch,
      files: { 'CHANGELOG.md': '# Changelog\n' },
    });
    const candidate = candidateProduced({
      thread_id: thread.id,
      run_id: thread.run_id,
      owner_id: alice.id,
      project_repository_id: projectRepositoryId,
      repository_id: widgets.id,
      branch,
      base_revision: pushed.baseRevision,
      candidate_revision: pushed.revision,
    });

    // Forged with the key alone: the whole event right, but no holder attested it.
    let last = (await publishJson(js, CANDIDATE, candidate, { msgId: uniqueId('forged-') })).seq;
    // Attested, by the holder of bob's run: naming alice's thread and repository under bob's run,
    // and bob's own thread with alice's repository. Neither is what bob's run is.
    const bobs = await heldThread(bob, bobsRepo);
    const borrowed = { ...candidate, run_id: bobs.thread.run_id };
    await bobs.holder.publish(js, domainEvents.candidateProduced, borrowed, uniqueId('borrowed-'));
    const foreignRepo = {
      ...candidate,
      run_id: bobs.thread.run_id,
      thread_id: bobs.thread.id,
      owner_id: bob.id,
      project_repository_id: bobs.projectRepositoryId,
    };
    await bobs.holder.publish(js, domainEvents.candidateProduced, foreignRepo, uniqueId('foreign-'));
    last = (await publishJson(js, CANDIDATE, { ...candidate, at: new Date().toISOString() }, { msgId: uniqueId('f-') }))
      .seq;
    await repohostHandled(last);
    expect(fake.pulls.filter((p) => p.head === branch)).toEqual([]);

    // The holder's own candidate, with the same key: the pull request opens.
    await holder.publish(js, domainEvents.candidateProduced, candidate, `${thread.run_id}:${projectRepositoryId}`);
    const pull = await waitFor('the pull request', async () => fake.pulls.find((p) => p.head === branch));
    expect(pull).toMatchObject({ base: 'trunk', state: 'open' });
    expect(fake.pulls.filter((p) => p.head === branch)).toHaveLength(1);
  });
});
