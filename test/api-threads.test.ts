import { RunEventPage, Task, TaskList, TaskWithRun, Thread, WorkList, RepositoryList } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import { RunDriver, question } from '@threadwork/testing';
import { json } from './support/http.js';
import { alice, bob, createThread, post, repoId, runOf, stack, useApiStack } from './support/api-stack.js';

// The public API end to end: repositories, a thread's life, bad input and ownership.

useApiStack();

describe('repositories', () => {
  it("lists the local provider's bare repositories with every contract field", async () => {
    const list = await json(await stack.fetch('/v1/repohost/repositories', { user: alice }), 200, RepositoryList);
    const widgets = list.repositories.find((r) => r.repository_id === repoId);
    expect(widgets).toMatchObject({
      name: 'widgets',
      full_name: 'local/widgets',
      default_branch: 'trunk',
      private: true,
    });
    const filtered = await json(
      await stack.fetch('/v1/repohost/repositories?q=WIDG', { user: alice }),
      200,
      RepositoryList,
    );
    expect(filtered.repositories.map((r) => r.name)).toEqual(['widgets']);
    const none = await json(
      await stack.fetch('/v1/repohost/repositories?q=nothing-like-this', { user: alice }),
      200,
      RepositoryList,
    );
    expect(none.repositories).toEqual([]);
    expect((await stack.fetch('/v1/repohost/connection', { user: alice })).status).toBe(200);
  });

  it('names a local repository without the path the server keeps it at', async () => {
    const listed = await (await stack.fetch('/v1/repohost/repositories', { user: alice })).text();
    const connection = await (await stack.fetch('/v1/repohost/connection', { user: alice })).text();
    const created = await createThread(alice, { name: 'where' });
    const thread = await (await stack.fetch(`/v1/threads/${created.id}`, { user: alice })).text();
    const work = await (await stack.fetch('/v1/work', { user: alice })).text();
    expect(created.repohost_url).toBe('local://local/widgets.git');
    for (const body of [listed, connection, JSON.stringify(created), thread, work]) {
      expect(body).not.toContain(stack.reposDir);
      expect(body).not.toContain('file:');
    }
  });
});

describe('a thread from creation to completion', () => {
  it('creates, reads, runs and finishes', async () => {
    const created = await createThread(alice, { name: 'changelog' });
    expect(created).toMatchObject({
      status: 'active',
      run_status: 'queued',
      run_url: `/v1/runs/${created.run_id}`,
      events_url: `/v1/runs/${created.run_id}/events`,
      branch: 'trunk',
    });

    const thread = await json(await stack.fetch(`/v1/threads/${created.id}`, { user: alice }), 200, Thread);
    expect(thread).toMatchObject({ id: created.id, status: 'active', name: 'changelog' });
    // Its newest run, for a client to follow from the thread alone.
    expect(thread.latest_run).toEqual({ id: created.run_id, status: 'queued' });

    const run = await runOf(alice, created.run_id);
    expect(run).toMatchObject({
      id: created.run_id,
      thread_id: created.id,
      status: 'queued',
      attempt: 0,
      terminal: false,
      error: null,
    });

    const task = await json(await stack.fetch(`/v1/tasks/${created.id}`, { user: alice }), 200, Task);
    expect(task.status).toBe('setup');
    expect(task.messages?.[0]).toMatchObject({
      id: created.message_id,
      role: 'user',
      parts: [{ type: 'text', text: 'Add a changelog' }],
    });
    expect(await json(await stack.fetch(`/v1/tasks/${created.id}/runs/resumable`, { user: alice }), 200)).toEqual({
      run_id: created.run_id,
    });

    const tasks = await json(await stack.fetch('/v1/tasks', { user: alice }), 200, TaskList);
    expect(tasks.tasks.map((t) => t.id)).toContain(created.id);
    const work = await json(await stack.fetch('/v1/work', { user: alice }), 200, WorkList);
    const project = work.projects.find((p) => p.id === created.project_id);
    expect(project).toMatchObject({ repository: 'local/widgets', branch: 'trunk' });
    expect(project?.repositories?.[0]).toMatchObject({
      repository_id: repoId,
      full_name: 'local/widgets',
      branch: 'trunk',
    });
    expect(project?.threads.find((t) => t.id === created.id)?.latest_run).toEqual({
      id: created.run_id,
      status: 'queued',
    });

    const driver = await RunDriver.claim(stack.nc, created.run_id);
    await driver.start();
    await driver.say('Added CHANGELOG.md');
    await driver.to('completed', { usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 } });

    const done = await runOf(alice, created.run_id);
    expect(done).toMatchObject({
      status: 'completed',
      terminal: true,
      usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
    });
    expect(done.started_at).not.toBeNull();
    expect(done.completed_at).not.toBeNull();

    const page = await json(
      await stack.fetch(`/v1/runs/${created.run_id}/events?limit=1000`, { user: alice }),
      200,
      RunEventPage,
    );
    const types = page.events.map((e) => (e.chunk as { type: string }).type);
    expect(types).toEqual([
      'run.status',
      'run.status',
      'run.status',
      'message.delta',
      'message.completed',
      'run.status',
    ]);
    expect(page.terminal).toBe(true);
    expect(page.next_sequence).toBe(page.events.at(-1)!.sequence + 1);
    const sequences = page.events.map((e) => e.sequence);
    expect([...sequences].sort((a, b) => a - b)).toEqual(sequences);

    const partial = await json(
      await stack.fetch(`/v1/runs/${created.run_id}/events?limit=2`, { user: alice }),
      200,
      RunEventPage,
    );
    expect(partial.events).toHaveLength(2);
    expect(partial.terminal).toBe(false);
    const empty = await json(
      await stack.fetch(`/v1/runs/${created.run_id}/events?from=${page.next_sequence}`, { user: alice }),
      200,
      RunEventPage,
    );
    expect(empty).toMatchObject({ events: [], next_sequence: page.next_sequence, terminal: true, status: 'completed' });

    // 0 is "before the first sequence": the whole log, for the page and for the stream.
    const fromZero = await json(
      await stack.fetch(`/v1/runs/${created.run_id}/events?from=0&limit=1000`, { user: alice }),
      200,
      RunEventPage,
    );
    expect(fromZero).toEqual(page);
    const stream = await stack.fetch(`/v1/runs/${created.run_id}/events/stream?from=0`, { user: alice });
    expect(stream.status).toBe(200);
    const streamed = [...(await stream.text()).matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(streamed).toEqual(sequences);

    expect((await stack.fetch(`/v1/tasks/${created.id}/runs/resumable`, { user: alice })).status).toBe(204);
    expect((await json(await stack.fetch(`/v1/tasks/${created.id}`, { user: alice }), 200, Task)).status).toBe('ready');
    expect((await json(await stack.fetch(`/v1/threads/${created.id}`, { user: alice }), 200, Thread)).status).toBe(
      'idle',
    );
  });

  it('answers 202 for a task too, in the task vocabulary', async () => {
    const created = await json(
      await post('/v1/tasks', alice, { repository_id: repoId, prompt: 'Task vocabulary' }),
      202,
      TaskWithRun,
    );
    expect(created.status).toBe('setup');
    expect(created).not.toHaveProperty('harness');
  });
});

describe('bad input', () => {
  async function invalid(res: Response, field: string) {
    const body = await json<{ error: { code: string; message: string } }>(res, 400);
    expect(body.error.code).toBe('invalid_request');
    expect(body.error.message).toContain(field);
  }

  it('names the offending field', async () => {
    await invalid(await post('/v1/tasks', alice, { repository_id: repoId, prompt: 'x'.repeat(4097) }), 'prompt');
    await invalid(await post('/v1/tasks', alice, { repository_id: 0, prompt: 'x' }), 'repository_id');
    await invalid(
      await post('/v1/tasks', alice, { repository_id: repoId, prompt: 'x', repository_ids: [2] }),
      'repository_ids',
    );
    await invalid(await post('/v1/threads', alice, { repository_id: repoId, prompt: '' }), 'prompt');
    await invalid(await stack.fetch(`/v1/threads/${'a'.repeat(257)}`, { user: alice }), 'id');
    await invalid(await stack.fetch('/v1/runs/r1/events?limit=1001', { user: alice }), 'limit');
    await invalid(await stack.fetch('/v1/tasks', { method: 'POST', user: alice, body: '{not json' }), 'body');
  });

  it('refuses a body over 1 MiB with 413', async () => {
    const res = await post('/v1/threads', alice, { repository_id: repoId, prompt: 'x', name: 'y'.repeat(1_100_000) });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: { code: 'payload_too_large' } });
  });

  it('answers 404 for a repository the caller cannot see, and creates nothing', async () => {
    const before = await json(await stack.fetch('/v1/tasks', { user: alice }), 200, TaskList);
    const res = await post('/v1/threads', alice, { repository_id: 987654321, prompt: 'nope' });
    expect(await json(res, 404)).toMatchObject({ error: { code: 'not_found' } });
    const after = await json(await stack.fetch('/v1/tasks', { user: alice }), 200, TaskList);
    expect(after.tasks).toHaveLength(before.tasks.length);
  });

  it('answers 401 before anything else', async () => {
    const res = await stack.fetch('/v1/tasks', { method: 'POST', body: '{not json' });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: 'Unauthorized' });
  });
});

describe('ownership', () => {
  it('keeps every resource of one user invisible to another (404)', async () => {
    const created = await createThread(alice);
    const driver = await RunDriver.claim(stack.nc, created.run_id);
    await driver.start();
    const interaction = await driver.ask([question('pick', ['a', 'b'])]);

    const reads = [
      `/v1/threads/${created.id}`,
      `/v1/tasks/${created.id}`,
      `/v1/tasks/${created.id}/runs/resumable`,
      `/v1/threads/${created.id}/messages`,
      `/v1/tasks/${created.id}/messages`,
      `/v1/threads/${created.id}/controls`,
      `/v1/tasks/${created.id}/controls`,
      `/v1/threads/${created.id}/interactions`,
      `/v1/runs/${created.run_id}`,
      `/v1/runs/${created.run_id}/events`,
      `/v1/runs/${created.run_id}/events/stream`,
      `/v1/interactions/${interaction.id}`,
    ];
    for (const path of reads) {
      const res = await stack.fetch(path, { user: bob });
      expect(res.status, path).toBe(404);
      expect(await res.json(), path).toMatchObject({ error: { code: 'not_found' } });
    }
    const writes: [string, unknown][] = [
      [`/v1/threads/${created.id}/messages`, { prompt: 'x' }],
      [`/v1/threads/${created.id}/queue`, { prompt: 'x' }],
      [`/v1/threads/${created.id}/steer`, { prompt: 'x' }],
      [`/v1/runs/${created.run_id}/cancel`, undefined],
      [
        `/v1/interactions/${interaction.id}/answer`,
        { action: 'answer', answers: { pick: { kind: 'options', optionIds: ['a'] } } },
      ],
    ];
    for (const [path, body] of writes) {
      const res = await post(path, bob, body);
      expect(res.status, path).toBe(404);
    }
    const bobsWork = await json(await stack.fetch('/v1/work', { user: bob }), 200, WorkList);
    expect(JSON.stringify(bobsWork)).not.toContain(created.id);
    const bobsTasks = await json(await stack.fetch('/v1/tasks', { user: bob }), 200, TaskList);
    expect(bobsTasks.tasks.map((t) => t.id)).not.toContain(created.id);
    // Nothing bob tried changed alice's run.
    expect((await runOf(alice, created.run_id)).status).toBe('waiting_for_input');
  });
});
