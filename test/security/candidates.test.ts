import {
  CONSUMERS,
  DOMAIN_STREAM,
  ThreadWithRun,
  WorkList,
  domainEvents,
  rpc,
  subjects,
  type CandidateProducedEvent,
} from '@threadwork/contracts';
import {
  connectNats,
  createLogger,
  jetStreamOf,
  natsAuthWithSeed,
  publishJson,
  request,
  type JetStreamClient,
  type NatsConnection,
} from '@threadwork/platform';
import {
  generateAppKeyPair,
  pkcePair,
  pushBranch,
  startFakeGitHub,
  uniqueId,
  type FakeGitHub,
  type FakeRepository,
  RunDriver,
} from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startStack, type Stack, type TestUser } from '../support/stack.js';

// repohost opens and updates pull requests on a user's repositories, with their installation's
// token, from `evt.runner.candidate.produced`, which anyone holding the runner's NATS key can
// publish. Played here with the runner's own key against the real services and a fake GitHub: a
// candidate counts only when the holder of its run attested it and the run is the event's thread,
// owner and repository.

const hasBinary = Boolean(inject('natsServerBin'));
const APP_ID = 778;
const SLUG = 'threadwork-candidates';
const SECRET = 'candidates-webhook-secret';
const SCHEME = 'twcand';
const OAUTH = { clientId: 'Iv1.cand', clientSecret: 'cand-client-secret' };

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

async function waitFor<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Links `login`'s installation to `user`: the install session, GitHub's page, the setup callback,
 * and the app redeeming the code it was handed with its verifier.
 */
async function connect(user: TestUser, login: string): Promise<void> {
  const pkce = pkcePair();
  const res = await stack.fetch('/v1/repohost/install-session', {
    method: 'POST',
    user,
    body: JSON.stringify({ return_to: `${SCHEME}://repohost/setup`, code_challenge: pkce.challenge }),
  });
  expect(res.status).toBe(201);
  const { install_url } = (await res.json()) as { install_url: string };
  const page = await fetch(install_url, { headers: { 'x-fake-login': login }, redirect: 'manual' });
  const callback = await fetch(page.headers.get('location')!, { redirect: 'manual' });
  const returned = new URL(callback.headers.get('location')!);
  expect(returned.searchParams.get('outcome')).toBe('installed');
  const linked = await stack.fetch('/v1/repohost/installations', {
    method: 'POST',
    user,
    body: JSON.stringify({ code: returned.searchParams.get('code'), code_verifier: pkce.verifier }),
  });
  expect(linked.status).toBe(201);
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
  const { jsm } = await jetStreamOf(stack.nc);
  await waitFor(`repohost to handle DOMAIN up to ${seq}`, async () => {
    const info = await jsm.consumers.info(DOMAIN_STREAM.name, CONSUMERS.repohost);
    return info.ack_floor.stream_seq >= seq && info.num_ack_pending === 0;
  });
}

const CANDIDATE = subjects.domain(
  domainEvents.candidateProduced.service,
  domainEvents.candidateProduced.entity,
  domainEvents.candidateProduced.verb,
);

describe.skipIf(!hasBinary)('candidates repohost publishes', () => {
  beforeAll(async () => {
    const keys = generateAppKeyPair();
    fake = await startFakeGitHub({
      appId: APP_ID,
      slug: SLUG,
      publicKey: keys.publicKey,
      webhookSecret: SECRET,
      oauth: OAUTH,
    });
    widgets = fake.addRepository('alice-gh', 'widgets', { branch: 'trunk', files: { 'README.md': '# widgets\n' } });
    bobsRepo = fake.addRepository('bob-gh', 'gizmos', { branch: 'trunk', files: { 'README.md': '# gizmos\n' } });
    stack = await startStack({
      GITHUB_APP_ID: String(APP_ID),
      GITHUB_APP_PRIVATE_KEY: keys.privateKey,
      GITHUB_WEBHOOK_SECRET: SECRET,
      GITHUB_APP_SLUG: SLUG,
      GITHUB_CLIENT_ID: OAUTH.clientId,
      GITHUB_CLIENT_SECRET: OAUTH.clientSecret,
      GITHUB_API_URL: fake.apiUrl,
      GITHUB_WEB_URL: fake.webUrl,
      APP_SCHEME: SCHEME,
      PUBLICATION_SYNC_MS: String(60 * 60_000),
    });
    fake.setupUrl = `${stack.baseUrl}/v1/repohost/setup`;
    fake.webhookUrl = `${stack.baseUrl}/v1/repohost/webhooks`;
    [alice, bob] = await Promise.all([stack.createUser('cand-alice'), stack.createUser('cand-bob')]);
    await connect(alice, 'alice-gh');
    await connect(bob, 'bob-gh');
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
    await stack?.stop();
    await fake?.close();
  });

  it('opens no pull request for a candidate its run’s holder did not produce, and one for the holder’s', async () => {
    const { thread, holder, projectRepositoryId } = await heldThread(alice, widgets);
    const branch = `threadwork/${thread.id}`;
    // The runner's part: a token for the run's repository, the thread branch pushed.
    const { token } = await request(runnerKey, rpc.repohost.token, {
      run_id: thread.run_id,
      claim_id: holder.claimId,
      repository_ids: [widgets.id],
    });
    const pushed = await pushBranch({
      cloneUrl: fake.cloneUrl('alice-gh/widgets'),
      token: token!,
      base: 'trunk',
      branch,
      files: { 'CHANGELOG.md': '# Changelog\n' },
    });
    const candidate: CandidateProducedEvent = {
      thread_id: thread.id,
      run_id: thread.run_id,
      owner_id: alice.id,
      project_repository_id: projectRepositoryId,
      repository_id: widgets.id,
      branch,
      base_branch: 'trunk',
      base_revision: pushed.baseRevision,
      candidate_revision: pushed.revision,
      diff: 'diff --git a/CHANGELOG.md b/CHANGELOG.md\n',
      truncated: false,
      files: [{ path: 'CHANGELOG.md', status: 'added' }],
      stats: { additions: 1, deletions: 0 },
      at: new Date().toISOString(),
    };

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
