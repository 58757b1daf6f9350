import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ReviewEvidence,
  ThreadWithRun,
  domainEvents,
  rpc,
  type CandidateFailedEvent,
  type CandidateProducedEvent,
  type EventDef,
  type NatsIdentity,
} from '@threadwork/contracts';
import {
  AppError,
  connectNats,
  createLogger,
  jetStreamOf,
  loadConfig,
  publishJson,
  request,
  type JetStreamHandles,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import { RepohostConfig, startRepohost } from '@threadwork/repohost';
import { RunsConfig, startRuns } from '@threadwork/runs';
import {
  baseServiceEnv,
  createBareRepo,
  isolatedNats,
  RunDriver,
  uniqueDbPrefix,
  domainHandled,
  waitFor,
  type IsolatedNats,
} from '@threadwork/testing';
import { ThreadsConfig, startThreads } from '@threadwork/threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REVIEW_CONSUMER, ReviewConfig, startReview } from '../src/index.js';

// Review against the real threads, runs and repohost (local provider) services; the test stands in
// for the runner by claiming runs and publishing the runner's DOMAIN events, attested under its claim.

describe('review', () => {
  let nats: IsolatedNats;
  let nc: NatsConnection;
  let jetstream: JetStreamHandles;
  const services: StartedService[] = [];
  let reposDir: string;
  let repositoryId: number;

  const alice = 'usr_review_alice';
  const bob = 'usr_review_bob';

  beforeAll(async () => {
    reposDir = mkdtempSync(join(tmpdir(), 'threadwork-review-'));
    createBareRepo(reposDir, 'widgets');
    nats = await isolatedNats();
    const dbPrefix = uniqueDbPrefix();
    const env = (identity: NatsIdentity) => ({
      ...baseServiceEnv(nats.env(identity), dbPrefix),
      REPOHOST_LOCAL_DIR: reposDir,
    });
    services.push(await startRuns(loadConfig(RunsConfig, env('runs'))));
    services.push(await startRepohost(loadConfig(RepohostConfig, env('repohost'))));
    services.push(await startThreads(loadConfig(ThreadsConfig, env('threads'))));
    services.push(await startReview(loadConfig(ReviewConfig, env('review'))));
    nc = await connectNats({
      servers: nats.url,
      auth: nats.testAuth,
      name: 'review-test',
      logger: createLogger({ service: 'test', level: 'silent' }),
    });
    jetstream = await jetStreamOf(nc);
    const { repositories } = await request(nc, rpc.repohost.repositories, { owner_id: alice });
    repositoryId = repositories[0]!.repository_id;
  });

  afterAll(async () => {
    await nc?.drain();
    for (const service of services.reverse()) await service.stop();
    await nats?.stop();
    rmSync(reposDir, { recursive: true, force: true });
  });

  async function createThread(owner: string) {
    const created = ThreadWithRun.parse(
      await request(nc, rpc.threads.create, {
        owner_id: owner,
        view: 'thread',
        body: { repository_id: repositoryId, prompt: 'Add a changelog' },
      }),
    );
    const project = await request(nc, rpc.threads.project, { owner_id: owner, thread_id: created.id });
    return {
      threadId: created.id,
      runId: created.run_id,
      projectId: project.project_id,
      prrId: project.repositories[0]!.id,
    };
  }

  const review = (owner: string, threadId: string, prrId: string) =>
    request(nc, rpc.review.get, { owner_id: owner, thread_id: threadId, project_repository_id: prrId });

  /** Waits until alice's review of `t` shows a diff like `expected`; answers the review. */
  const reviewShows = (t: { threadId: string; prrId: string }, expected: Record<string, unknown>) =>
    waitFor(
      `a diff like ${JSON.stringify(expected)}`,
      async () => {
        const got = await review(alice, t.threadId, t.prrId);
        expect(got.diff).toMatchObject(expected);
        return got;
      },
      60_000,
      { tolerateErrors: true },
    );

  let counter = 0;
  function candidate(
    t: { threadId: string; runId: string; prrId: string },
    over: Partial<CandidateProducedEvent> = {},
  ) {
    counter += 1;
    const event: CandidateProducedEvent = {
      thread_id: t.threadId,
      run_id: t.runId,
      owner_id: alice,
      project_repository_id: t.prrId,
      repository_id: repositoryId,
      branch: `threadwork/${t.threadId}`,
      base_branch: 'main',
      base_revision: 'b'.repeat(40),
      candidate_revision: counter.toString(16).padStart(40, 'c'),
      diff: `diff --git a/CHANGELOG.md b/CHANGELOG.md\n+entry ${counter}\n`,
      truncated: false,
      files: [{ path: 'CHANGELOG.md', status: 'added' }],
      stats: { additions: counter, deletions: 0 },
      at: new Date().toISOString(),
      ...over,
    };
    return event;
  }

  function failure(t: { threadId: string; runId: string; prrId: string }, message: string, at = new Date()) {
    const event: CandidateFailedEvent = {
      thread_id: t.threadId,
      run_id: t.runId,
      owner_id: alice,
      project_repository_id: t.prrId,
      repository_id: repositoryId,
      message,
      at: at.toISOString(),
    };
    return event;
  }

  /** Waits until review's consumer has handled everything published to it so far. */
  const processed = () => domainHandled(jetstream.jsm, REVIEW_CONSUMER);

  async function publish(def: EventDef, event: object, msgId: string) {
    await publishJson(jetstream.js, def.subject, event, { msgId });
  }

  it('is no_sandbox before any candidate, then pending while the run is live, ready after', async () => {
    const t = await createThread(alice);
    const first = ReviewEvidence.parse(await review(alice, t.threadId, t.prrId));
    expect(first).toEqual({
      thread_id: t.threadId,
      project_id: t.projectId,
      project_repository_id: t.prrId,
      diff: { diff: '', files: [], status: 'no_sandbox', candidate_revision: '', truncated: false },
      stats: { additions: 0, deletions: 0 },
      publication: null,
    });

    const event = candidate(t);
    const runner = await RunDriver.claim(nc, t.runId);
    await runner.publish(
      jetstream.js,
      domainEvents.candidateProduced,
      event,
      `${event.run_id}:${event.project_repository_id}`,
    );
    // The first run is still live, so the diff shown is pending.
    const pending = await reviewShows(t, { status: 'pending' });
    expect(pending.diff.candidate_revision).toBe(event.candidate_revision);

    await request(nc, rpc.runs.cancel, { owner_id: alice, run_id: t.runId });
    await runner.to('cancelled');
    const ready = await review(alice, t.threadId, t.prrId);
    expect(ready).toMatchObject({
      diff: {
        status: 'ready',
        diff: event.diff,
        files: event.files,
        candidate_revision: event.candidate_revision,
        truncated: false,
      },
      stats: event.stats,
      publication: null,
    });

    // A follow-up message admits the next run: pending again, still showing the last candidate.
    await waitFor(
      'the thread to be idle',
      async () => {
        const thread = await request(nc, rpc.threads.get, { owner_id: alice, thread_id: t.threadId, view: 'thread' });
        expect(thread.status).toBe('idle');
        return true;
      },
      60_000,
      { tolerateErrors: true },
    );
    await request(nc, rpc.threads.message, { owner_id: alice, thread_id: t.threadId, body: { prompt: 'More' } });
    expect((await review(alice, t.threadId, t.prrId)).diff).toMatchObject({
      status: 'pending',
      candidate_revision: event.candidate_revision,
    });
  });

  it('passes truncated through, keeps the newest candidate and shows a newer failure as error', async () => {
    const t = await createThread(alice);
    const newer = candidate(t, { truncated: true, diff: 'x'.repeat(1000) });
    const older = candidate(t, { at: new Date(Date.now() - 60_000).toISOString() });
    const failed = failure(t, 'git commit failed', new Date(Date.now() + 500));
    // Attested while the run is live, published once it has ended (so review shows them ready).
    const runner = await RunDriver.claim(nc, t.runId);
    await runner.attest(domainEvents.candidateProduced, newer);
    await runner.attest(domainEvents.candidateProduced, older);
    await runner.attest(domainEvents.candidateFailed, failed);
    const recovered = candidate(t, { at: new Date(Date.now() + 1_000).toISOString() });
    await runner.attest(domainEvents.candidateProduced, recovered);
    await request(nc, rpc.runs.cancel, { owner_id: alice, run_id: t.runId });
    await runner.to('cancelled');

    await publish(domainEvents.candidateProduced, newer, 'newer');
    await publish(domainEvents.candidateProduced, older, 'older');
    await publish(domainEvents.candidateProduced, newer, 'newer-again');
    await reviewShows(t, { status: 'ready', truncated: true, candidate_revision: newer.candidate_revision });
    // The older one arrived after the newer one but does not win.
    await processed();
    expect((await review(alice, t.threadId, t.prrId)).diff.candidate_revision).toBe(newer.candidate_revision);

    await publish(domainEvents.candidateFailed, failed, 'failed');
    // The last good candidate stays visible beside the error.
    await reviewShows(t, { status: 'error', candidate_revision: newer.candidate_revision });
    await publish(domainEvents.candidateProduced, recovered, 'recovered');
    await reviewShows(t, { status: 'ready', candidate_revision: recovered.candidate_revision });
  });

  it('stores no evidence its run’s holder did not publish: a key alone, or another run’s holder, shows nothing', async () => {
    const t = await createThread(alice);
    const bobs = await createThread(bob);
    const runner = await RunDriver.claim(nc, t.runId);
    const bobsRunner = await RunDriver.claim(nc, bobs.runId);

    // Published with no attestation, as anyone with the runner's NATS key can.
    const forged = candidate(t, { diff: 'FORGED by a key alone' });
    await publish(domainEvents.candidateProduced, forged, 'forged');
    // Attested by the holder of bob's run, naming alice's thread and repository.
    const borrowed = candidate(t, { run_id: bobs.runId, diff: 'FORGED under another run' });
    await bobsRunner.publish(jetstream.js, domainEvents.candidateProduced, borrowed, 'borrowed');
    const failed = failure(t, 'FORGED failure');
    await publish(domainEvents.candidateFailed, failed, 'forged-failure');
    await processed();
    expect((await review(alice, t.threadId, t.prrId)).diff.status).toBe('no_sandbox');

    // The holder's own candidate is stored.
    const real = candidate(t);
    await runner.publish(jetstream.js, domainEvents.candidateProduced, real, 'real');
    await reviewShows(t, { status: 'pending', candidate_revision: real.candidate_revision });
    for (const driver of [runner, bobsRunner])
      await driver.to('failed', { error: { code: 'runner_lost', message: 'test' } });
  });

  it('is not_found for a foreign thread, an unknown thread or a repository of another project', async () => {
    const t = await createThread(alice);
    const other = await createThread(bob);
    const code = (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (e: unknown) => (e instanceof AppError ? e.code : String(e)),
      );
    expect(await code(review(bob, t.threadId, t.prrId))).toBe('not_found');
    expect(await code(review(alice, 'thr_nope', t.prrId))).toBe('not_found');
    expect(await code(review(alice, t.threadId, 'prr_nope'))).toBe('not_found');
    expect(await code(review(alice, t.threadId, other.prrId))).toBe('not_found');
  });
});
