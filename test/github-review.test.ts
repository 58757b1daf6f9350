import { ReviewEvidence, MessageAccepted, ThreadWithRun, WorkList, domainEvents } from '@threadwork/contracts';
import { candidateProduced, pushAsRunner, RunDriver, waitFor } from '@threadwork/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { linkInstallation } from './support/github.js';
import type { TestUser } from './support/stack.js';
import { json } from './support/http.js';
import { alice, bob, fake, gh, jetstream, post, stack, useGitHubStack, widgets } from './support/github-e2e.js';

// The GitHub App end to end: review of a thread's candidate and its publication as a pull request.

useGitHubStack();

// Alice's installation, linked the legitimate way, holds the repository the thread works on.
beforeAll(async () => {
  await linkInstallation(gh, alice, 'alice-gh');
});

describe('review and publication', () => {
  let threadId: string;
  let runId: string;
  let projectRepositoryId: string;

  const reviewOf = (user: TestUser, prr = projectRepositoryId) =>
    stack.fetch(`/v1/threads/${threadId}/review?project_repository_id=${encodeURIComponent(prr)}`, { user });
  const evidence = async () => json(await reviewOf(alice), 200, ReviewEvidence);

  beforeAll(async () => {
    const thread = await json(
      await post('/v1/threads', alice, { repository_id: widgets.id, prompt: 'Write the changelog' }),
      202,
      ThreadWithRun,
    );
    threadId = thread.id;
    runId = thread.run_id;
    const work = await json(await stack.fetch('/v1/work', { user: alice }), 200, WorkList);
    const project = work.projects.find((p) => p.threads.some((t) => t.id === threadId))!;
    projectRepositoryId = project.repositories[0]!.id;
  });

  it('is no_sandbox before any candidate and 404 for others or unknown repositories', async () => {
    expect(await evidence()).toMatchObject({
      thread_id: threadId,
      project_repository_id: projectRepositoryId,
      diff: { status: 'no_sandbox', diff: '', files: [], candidate_revision: '', truncated: false },
      publication: null,
    });
    expect((await reviewOf(bob)).status).toBe(404);
    expect((await reviewOf(alice, 'prr_unknown')).status).toBe(404);
    expect((await stack.fetch(`/v1/threads/${threadId}/review`, { user: alice })).status).toBe(400);
  });

  it('turns a candidate into a pull request whose checks go pending → failure → success', async () => {
    const branch = `threadwork/${threadId}`;
    // The runner's part: a token for the repository, the thread branch pushed with real git.
    const runner = await RunDriver.claim(stack.nc, runId);
    await runner.to('running');
    const pushed = await pushAsRunner(stack.nc, fake, {
      run_id: runId,
      claim_id: runner.claimId,
      repository: widgets,
      branch,
      files: { 'CHANGELOG.md': '# Changelog\n\n- first entry\n' },
    });
    const event = candidateProduced({
      thread_id: threadId,
      run_id: runId,
      owner_id: alice.id,
      project_repository_id: projectRepositoryId,
      repository_id: widgets.id,
      branch,
      base_revision: pushed.baseRevision,
      candidate_revision: pushed.revision,
      diff: 'diff --git a/CHANGELOG.md b/CHANGELOG.md\nnew file mode 100644\n+# Changelog\n',
      stats: { additions: 3, deletions: 0 },
    });
    await runner.publish(jetstream.js, domainEvents.candidateProduced, event, `${runId}:${projectRepositoryId}`);

    // The run is still live: pending, with the candidate shown and the pull request opened.
    const opened = await waitFor('the pull request', async () => {
      const got = await evidence();
      return got.publication ? got : undefined;
    });
    expect(opened.diff).toMatchObject({ status: 'pending', candidate_revision: pushed.revision });
    const pull = fake.pulls.find((p) => p.head === branch)!;
    expect(pull).toMatchObject({ base: 'trunk', draft: true, state: 'open' });
    expect(opened.publication).toMatchObject({
      projectRepositoryId,
      repository: { owner: 'alice-gh', name: 'widgets' },
      prNumber: pull.number,
      prUrl: `${fake.webUrl}/alice-gh/widgets/pull/${pull.number}`,
      branch,
      headSha: pushed.revision,
      state: 'draft',
      checksAggregate: 'none',
    });

    expect((await post(`/v1/runs/${runId}/cancel`, alice, {})).status).toBe(202);
    await runner.to('cancelled');
    const ready = await evidence();
    expect(ready).toMatchObject({
      diff: { status: 'ready', diff: event.diff, files: event.files, truncated: false },
      stats: { additions: 3, deletions: 0 },
    });

    const aggregate = (want: string) =>
      waitFor(`checksAggregate ${want}`, async () => {
        const got = await evidence();
        return got.publication?.checksAggregate === want ? got : undefined;
      });

    const check = fake.addCheckRun('alice-gh/widgets', pushed.revision, {
      name: 'build',
      status: 'in_progress',
      started_at: new Date().toISOString(),
    });
    expect((await fake.sendWebhook('check_run', fake.payloads.checkRun('created', check.id))).status).toBe(202);
    await aggregate('pending');

    fake.updateCheckRun(check.id, {
      status: 'completed',
      conclusion: 'failure',
      completed_at: new Date().toISOString(),
    });
    expect((await fake.sendWebhook('check_run', fake.payloads.checkRun('completed', check.id))).status).toBe(202);
    const failed = await aggregate('failure');
    expect(failed.publication?.checks).toEqual([
      {
        id: check.id,
        name: 'build',
        status: 'completed',
        conclusion: 'failure',
        detailsUrl: check.details_url,
        startedAt: check.started_at,
        completedAt: check.completed_at,
      },
    ]);

    // Re-run green, plus a commit status from another CI.
    fake.updateCheckRun(check.id, { conclusion: 'success' });
    expect((await fake.sendWebhook('check_run', fake.payloads.checkRun('rerequested', check.id))).status).toBe(202);
    const status = fake.setStatus('alice-gh/widgets', pushed.revision, { context: 'ci/lint', state: 'success' });
    expect((await fake.sendWebhook('status', fake.payloads.status(status.id))).status).toBe(202);
    const green = await waitFor('the green checks and status', async () => {
      const got = await evidence();
      return got.publication?.checksAggregate === 'success' && got.publication.commitStatuses.length === 1
        ? got
        : undefined;
    });
    expect(green.publication?.commitStatuses).toEqual([
      { id: status.id, context: 'ci/lint', state: 'success', targetUrl: status.target_url },
    ]);
    expect(fake.pulls.filter((p) => p.head === branch)).toHaveLength(1);
  });

  it('passes a truncated diff through', async () => {
    // The thread's next run, as a follow-up admits it once the last one has ended.
    const second = await waitFor('the thread to take a follow-up', async () => {
      const res = await post(`/v1/threads/${threadId}/messages`, alice, { prompt: 'Add the whole history' });
      return res.status === 202 ? MessageAccepted.parse(await res.json()) : undefined;
    });
    const runner = await RunDriver.claim(stack.nc, second.run_id);
    const big = 'x'.repeat(64 * 1024);
    const event = candidateProduced({
      thread_id: threadId,
      run_id: second.run_id,
      owner_id: alice.id,
      project_repository_id: projectRepositoryId,
      repository_id: widgets.id,
      diff: big,
      truncated: true,
      files: [{ path: 'big.txt', status: 'added' }],
      stats: { additions: 100_000, deletions: 0 },
    });
    await runner.publish(
      jetstream.js,
      domainEvents.candidateProduced,
      event,
      `${second.run_id}:${projectRepositoryId}`,
    );
    const got = await waitFor('the truncated candidate', async () => {
      const e = await evidence();
      return e.diff.truncated ? e : undefined;
    });
    expect(got.diff).toMatchObject({ truncated: true, candidate_revision: 'b'.repeat(40), diff: big });
  });
});
