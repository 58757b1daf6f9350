import { rpc, TaskWithRun, ThreadWithRun, Task, WorkList, type HostedRepository } from '@threadwork/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HARNESS_DEFAULTS } from './support/doubles.js';
import { startHarness, startHarnessWithDoubles, type DoublesHarness, type Harness } from './support/harness.js';

describe('threads.create', () => {
  let h: Harness;

  beforeAll(async () => {
    // Two replicas: requests are spread over both, as in a deployment.
    h = await startHarness({ replicas: 2 });
  });
  afterAll(async () => {
    await h?.stop();
  });

  const countFor = (collection: string, filter: Record<string, unknown>) =>
    h.db.collection(collection).countDocuments(filter);

  /** The repositories as repohost gives them to `owner`, in the order asked. */
  const repositories = async (owner: string, ...ids: number[]): Promise<[HostedRepository, ...HostedRepository[]]> => {
    const { repositories: found } = await h.call(rpc.repohost.access, { owner_id: owner, repository_ids: ids });
    const [first, ...rest] = found;
    if (!first) throw new Error('repohost gave no repository');
    return [first, ...rest];
  };

  it('creates a thread, its first message and run 1, and answers a Thread with run', async () => {
    const owner = h.newOwner();
    const [app] = await repositories(owner, h.repos.app);
    const result = ThreadWithRun.parse(
      await h.call(rpc.threads.create, {
        owner_id: owner,
        view: 'thread',
        body: { repository_id: h.repos.app, prompt: 'Fix the build', name: 'build fix', model: 'gpt-5' },
      }),
    );
    expect(result).toMatchObject({
      name: 'build fix',
      status: 'active',
      sandbox_status: null,
      repohost_url: app.url,
      branch: 'main',
      harness: HARNESS_DEFAULTS.harness,
      model: 'gpt-5',
      reasoning_effort: HARNESS_DEFAULTS.reasoning_effort,
      collaboration_mode: 'default',
      run_status: 'queued',
      run_url: `/v1/runs/${result.run_id}`,
      events_url: `/v1/runs/${result.run_id}/events`,
    });
    expect(result.id).toMatch(/^thr_[0-9a-f]{32}$/);
    expect(result.message_id).toMatch(/^msg_[0-9a-f]{32}$/);

    const admission = await h.runs.admissionOf(result.id);
    expect(admission).toMatchObject({
      owner_id: owner,
      project_id: result.project_id,
      message_id: result.message_id,
      run_id: result.run_id,
      prompt: 'Fix the build',
      model: 'gpt-5',
      repositories: [
        {
          repository_id: h.repos.app,
          full_name: app.full_name,
          branch: 'main',
          clone_url: app.clone_url,
        },
      ],
    });
    // Defaults are left to runs.
    expect(admission?.harness).toBeUndefined();
    expect(admission?.reasoning_effort).toBeUndefined();

    const page = await h.call(rpc.threads.messages, { owner_id: owner, thread_id: result.id, limit: 50 });
    expect(page).toEqual({
      messages: [
        {
          id: result.message_id,
          role: 'user',
          parts: [{ type: 'text', text: 'Fix the build' }],
          created_at: expect.any(String),
        },
      ],
      next_cursor: null,
    });
    const thread = await h.call(rpc.threads.get, { owner_id: owner, thread_id: result.id, view: 'thread' });
    const { run_id: _r, run_status: _s, message_id: _m, run_url: _u, events_url: _e, ...shown } = result;
    // The run's status events, which the real runs service publishes, may touch the thread since.
    expect(thread).toEqual({ ...shown, updated_at: expect.any(String) });
    expect(Date.parse(String(thread.updated_at))).toBeGreaterThanOrEqual(Date.parse(shown.updated_at));
  });

  it('creates a task with the caller message id and answers a Task with run', async () => {
    const owner = h.newOwner();
    const result = TaskWithRun.parse(
      await h.call(rpc.threads.create, {
        owner_id: owner,
        view: 'task',
        body: { repository_id: h.repos.app, prompt: 'Add a test', message_id: 'client-msg-1' },
      }),
    );
    expect(result.status).toBe('setup');
    expect(result.message_id).toBe('client-msg-1');
    expect(result).not.toHaveProperty('harness');
    expect(result).not.toHaveProperty('thread_id');

    const task = Task.parse(await h.call(rpc.threads.get, { owner_id: owner, thread_id: result.id, view: 'task' }));
    expect(task.status).toBe('setup');
    expect(task.messages).toEqual([
      {
        id: 'client-msg-1',
        role: 'user',
        parts: [{ type: 'text', text: 'Add a test' }],
        created_at: expect.any(String),
      },
    ]);
    const list = await h.call(rpc.threads.list, { owner_id: owner });
    expect(list.tasks.map((t) => t.id)).toEqual([result.id]);
  });

  it('reuses the project of the same ordered repositories and lists it in the work list', async () => {
    const owner = h.newOwner();
    const [app, lib] = await repositories(owner, h.repos.app, h.repos.lib);
    if (!lib) throw new Error('repohost gave no second repository');
    const create = (body: { repository_id: number; repository_ids?: number[]; branch?: string }) =>
      h.call(rpc.threads.create, { owner_id: owner, view: 'thread', body: { prompt: 'Go', ...body } });
    const first = ThreadWithRun.parse(
      await create({ repository_id: h.repos.app, repository_ids: [h.repos.lib], branch: 'develop' }),
    );
    const second = ThreadWithRun.parse(
      await create({ repository_id: h.repos.app, repository_ids: [h.repos.lib, h.repos.app] }),
    );
    const swapped = ThreadWithRun.parse(await create({ repository_id: h.repos.lib, repository_ids: [h.repos.app] }));
    expect(second.project_id).toBe(first.project_id);
    expect(swapped.project_id).not.toBe(first.project_id);
    expect(first.branch).toBe('develop');
    expect(second.branch).toBe('main');
    expect(await countFor('projects', { owner_id: owner })).toBe(2);

    const work = WorkList.parse(await h.call(rpc.threads.work, { owner_id: owner }));
    const project = work.projects.find((p) => p.id === first.project_id);
    expect(project).toMatchObject({
      name: 'app + lib',
      repository: app.full_name,
      branch: 'develop',
      repositories: [
        { repository_id: h.repos.app, full_name: app.full_name, branch: 'develop' },
        { repository_id: h.repos.lib, full_name: lib.full_name, branch: 'trunk' },
      ],
    });
    // Newest first; additions and deletions are unknown until something reports them.
    expect(project?.threads.map((t) => t.id)).toEqual([second.id, first.id]);
    expect(project?.threads[0]).toMatchObject({
      status: 'active',
      prompt: 'Go',
      latest_run: { id: second.run_id, status: 'queued' },
    });
    expect(project?.threads[0]).not.toHaveProperty('additions');
    expect(project?.threads[0]).not.toHaveProperty('sandbox_status');

    // The runner clones each repository with the project repository id review takes.
    const admission = await h.runs.admissionOf(first.id);
    expect(admission?.repositories.map((r) => [r.project_repository_id, r.branch])).toEqual(
      project?.repositories.map((r) => [r.id, r.branch]),
    );
  });

  it('refuses a harness the deployment does not serve, naming the ones it does, and creates nothing', async () => {
    const owner = h.newOwner();
    const err = await h.callError(rpc.threads.create, {
      owner_id: owner,
      view: 'thread',
      body: { repository_id: h.repos.app, prompt: 'Go', harness: 'claude-code' },
    });
    expect(err.code).toBe('invalid_request');
    expect(err.message).toBe('body.harness: not a harness this deployment serves (codex)');
    expect(await countFor('threads', { owner_id: owner })).toBe(0);
    expect(await countFor('projects', { owner_id: owner })).toBe(0);
    expect(h.runs.admissions.filter((a) => a.owner_id === owner)).toEqual([]);
    // The one it serves is taken.
    const served = await h.call(rpc.threads.create, {
      owner_id: owner,
      view: 'thread',
      body: { repository_id: h.repos.app, prompt: 'Go', harness: 'codex' },
    });
    expect(served).toMatchObject({ harness: 'codex' });
  });

  it('answers the same ids for the same client_request_id and body, and a conflict for another body', async () => {
    const owner = h.newOwner();
    const body = { repository_id: h.repos.app, prompt: 'Once', client_request_id: 'req-1' };
    const first = await h.call(rpc.threads.create, { owner_id: owner, view: 'thread', body });
    const again = await h.call(rpc.threads.create, {
      owner_id: owner,
      view: 'thread',
      body: { client_request_id: 'req-1', prompt: 'Once', repository_id: h.repos.app },
    });
    // The replay reads the thread as it is now: its run's status events may have touched it since.
    expect(again).toEqual({ ...first, updated_at: expect.any(String) });
    expect(Date.parse(String(again.updated_at))).toBeGreaterThanOrEqual(Date.parse(String(first.updated_at)));

    const err = await h.callError(rpc.threads.create, {
      owner_id: owner,
      view: 'thread',
      body: { ...body, prompt: 'Twice' },
    });
    expect(err.code).toBe('idempotency_conflict');

    // Another owner's identical key is another request.
    const other = h.newOwner();
    const theirs = await h.call(rpc.threads.create, { owner_id: other, view: 'thread', body });
    expect(theirs.id).not.toBe(first.id);
    expect((await h.runs.created()).filter((run) => [first.id, theirs.id].includes(run.thread_id))).toHaveLength(2);
  });

  it('converges 20 concurrent identical creates on one thread, one message and one run', async () => {
    const owner = h.newOwner();
    const body = {
      repository_id: h.repos.app,
      repository_ids: [h.repos.lib],
      prompt: 'Race',
      client_request_id: 'race-1',
    };
    const results = await Promise.all(
      Array.from({ length: 20 }, () => h.call(rpc.threads.create, { owner_id: owner, view: 'thread', body })),
    );
    const ids = new Set(results.map((r) => `${r.id} ${r.run_id} ${r.message_id} ${r.project_id}`));
    expect(ids.size).toBe(1);
    const [result] = results;
    expect(await h.runs.created(result?.id)).toHaveLength(1);
    expect(await countFor('threads', { owner_id: owner })).toBe(1);
    expect(await countFor('projects', { owner_id: owner })).toBe(1);
    expect(await countFor('messages', { thread_id: result?.id })).toBe(1);
    expect(await countFor('requests', { owner_id: owner })).toBe(1);
  });

  it("treats another owner's thread as nonexistent everywhere", async () => {
    const owner = h.newOwner();
    const intruder = h.newOwner();
    const thread = await h.call(rpc.threads.create, {
      owner_id: owner,
      view: 'thread',
      body: { repository_id: h.repos.app, prompt: 'Mine' },
    });
    const target = { owner_id: intruder, thread_id: thread.id };
    const codes = await Promise.all([
      h.callError(rpc.threads.get, { ...target, view: 'thread' }),
      h.callError(rpc.threads.get, { ...target, view: 'task' }),
      h.callError(rpc.threads.messages, { ...target, limit: 10 }),
      h.callError(rpc.threads.controls, { ...target, view: 'thread' }),
      h.callError(rpc.threads.resumable, target),
      h.callError(rpc.threads.message, { ...target, body: { prompt: 'hi' } }),
      h.callError(rpc.threads.queue, { ...target, body: { prompt: 'hi' } }),
      h.callError(rpc.threads.steer, { ...target, body: { prompt: 'hi' } }),
    ]);
    expect(codes.map((e) => e.code)).toEqual(Array(8).fill('not_found'));
    expect((await h.call(rpc.threads.list, { owner_id: intruder })).tasks).toEqual([]);
    expect((await h.call(rpc.threads.work, { owner_id: intruder })).projects).toEqual([]);
    expect(await h.runs.created(thread.id)).toHaveLength(1);
  });
});

// What the real services do not let a test arrange: an owner who sees no repository (the local
// provider shows its repositories to everyone), runs unreachable for one admission, an admission
// whose answer is lost.
describe('threads.create against the doubles', () => {
  let h: DoublesHarness;

  beforeAll(async () => {
    // Two replicas: requests are spread over both, as in a deployment.
    h = await startHarnessWithDoubles({ replicas: 2 });
  });
  afterAll(async () => {
    await h?.stop();
  });

  const countFor = (collection: string, filter: Record<string, unknown>) =>
    h.db.collection(collection).countDocuments(filter);

  it('answers not_found for a repository the owner cannot see, and creates nothing', async () => {
    const owner = h.newOwner();
    const err = await h.callError(rpc.threads.create, {
      owner_id: owner,
      view: 'thread',
      body: { repository_id: 101, repository_ids: [999], prompt: 'Go' },
    });
    expect(err.code).toBe('not_found');
    const stranger = await h.callError(rpc.threads.create, {
      owner_id: 'usr_stranger',
      view: 'task',
      body: { repository_id: 101, prompt: 'Go' },
    });
    expect(stranger.code).toBe('not_found');
    expect(await countFor('threads', { owner_id: owner })).toBe(0);
    expect(h.runs.admissions.filter((a) => a.owner_id === owner)).toEqual([]);
  });

  it('finishes a create that stopped half-way when the caller retries it', async () => {
    const owner = h.newOwner();
    const body = { repository_id: 101, prompt: 'Retry me', client_request_id: 'half-1' };
    h.runs.failNextAdmits(1);
    const err = await h.callError(rpc.threads.create, { owner_id: owner, view: 'task', body });
    expect(err.code).toBe('unavailable');
    // Not admitted, so not shown.
    expect((await h.call(rpc.threads.list, { owner_id: owner })).tasks).toEqual([]);

    const retried = TaskWithRun.parse(await h.call(rpc.threads.create, { owner_id: owner, view: 'task', body }));
    expect(await countFor('threads', { owner_id: owner })).toBe(1);
    expect(h.runs.created(retried.id)).toHaveLength(1);
    expect((await h.call(rpc.threads.list, { owner_id: owner })).tasks.map((t) => t.id)).toEqual([retried.id]);
  });

  it('shows a create whose admission answer was lost once its run reports a status', async () => {
    const owner = h.newOwner();
    h.runs.loseNextAdmitAnswer();
    const err = await h.callError(rpc.threads.create, {
      owner_id: owner,
      view: 'thread',
      body: { repository_id: 101, prompt: 'Lost' },
    });
    expect(err.code).toBe('unavailable');
    const [run] = h.runs
      .created()
      .filter((r) => h.runs.admissions.some((a) => a.owner_id === owner && a.run_id === r.id));
    if (!run) throw new Error('the double created no run');
    expect((await h.call(rpc.threads.list, { owner_id: owner })).tasks).toEqual([]);

    // The runner picks the run up: threads learns of the run from its status event.
    const { seq } = await h.runs.transition(run.id, 'starting');
    await h.handledUpTo(seq);
    const thread = await h.call(rpc.threads.get, { owner_id: owner, thread_id: run.thread_id, view: 'thread' });
    expect(thread).toMatchObject({ status: 'active', harness: HARNESS_DEFAULTS.harness });
    const page = await h.call(rpc.threads.messages, { owner_id: owner, thread_id: run.thread_id, limit: 10 });
    expect(page.messages.map((m) => [m.id, m.parts[0]?.text])).toEqual([[run.message_id, 'Lost']]);
  });
});
