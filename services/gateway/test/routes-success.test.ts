import {
  AnswerResult,
  ControlList,
  ControlSubmission,
  Interaction,
  InteractionList,
  MessageAccepted,
  MessagePage,
  ProviderConnection,
  RepositoryList,
  Run,
  Task,
  TaskControlList,
  TaskList,
  TaskWithRun,
  Thread,
  ThreadWithRun,
  WorkList,
} from '@threadwork/contracts';
import { question } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { alice, alpha, app, beta, complete, get, harness, post, useRoutesHarness } from './routes-harness.js';

// Every route of the public contract against the real services: success statuses and shapes, each
// body parsed with its contract schema.

describe('gateway routes', () => {
  useRoutesHarness();

  describe('success', () => {
    it('GET /v1/work', async () => {
      const { threadId } = await harness.thread(alice.user._id);
      const res = await get('/v1/work');
      expect(res.statusCode).toBe(200);
      const work = WorkList.parse(res.json());
      expect(work.projects.map((p) => p.threads[0]?.id)).toContain(threadId);
    });

    it('GET /v1/repohost/connection and /v1/repohost/repositories', async () => {
      const connection = await get('/v1/repohost/connection');
      expect(connection.statusCode).toBe(200);
      expect(ProviderConnection.parse(connection.json()).status).toBe('ready');

      const all = await get('/v1/repohost/repositories');
      expect(RepositoryList.parse(all.json()).repositories).toHaveLength(2);
      const some = await get('/v1/repohost/repositories?q=ALP');
      expect(some.statusCode).toBe(200);
      expect(RepositoryList.parse(some.json()).repositories.map((r) => r.name)).toEqual(['alpha']);
    });

    it('POST /v1/tasks → 202 task with run; GET /v1/tasks and /v1/tasks/{id}', async () => {
      const created = await post('/v1/tasks', { repository_id: alpha(), prompt: 'fix the build', model: 'gpt-test' });
      expect(created.statusCode).toBe(202);
      const task = TaskWithRun.parse(created.json());
      expect(task.status).toBe('setup');
      expect(task.events_url).toBe(`/v1/runs/${task.run_id}/events`);

      const list = await get('/v1/tasks');
      expect(list.statusCode).toBe(200);
      expect(TaskList.parse(list.json()).tasks.map((t) => t.id)).toContain(task.id);

      const one = await get(`/v1/tasks/${task.id}`);
      expect(one.statusCode).toBe(200);
      expect(Task.parse(one.json()).id).toBe(task.id);
    });

    it('POST /v1/threads → 202 thread with run; GET /v1/threads/{id}', async () => {
      const created = await post('/v1/threads', {
        repository_id: alpha(),
        repository_ids: [beta()],
        prompt: 'add a test',
        collaboration_mode: 'plan',
      });
      expect(created.statusCode).toBe(202);
      const thread = ThreadWithRun.parse(created.json());
      expect(thread.run_status).toBe('queued');

      const one = await get(`/v1/threads/${thread.id}`);
      expect(one.statusCode).toBe(200);
      expect(Thread.parse(one.json())).toMatchObject({ id: thread.id, harness: 'codex' });
    });

    it('GET /v1/tasks/{id}/runs/resumable → 200 {run_id}, or 204 with no body', async () => {
      const { threadId: active, run } = await harness.run(alice.user._id);
      const res = await get(`/v1/tasks/${active}/runs/resumable`);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ run_id: run.id });

      const idle = await harness.idleThread(alice.user._id);
      const none = await get(`/v1/tasks/${idle}/runs/resumable`);
      expect(none.statusCode).toBe(204);
      expect(none.body).toBe('');
      expect(none.headers['content-type']).toBeUndefined();
    });

    it('POST /v1/threads/{id}/messages → 202 accepted', async () => {
      const idle = await harness.idleThread(alice.user._id);
      const res = await post(`/v1/threads/${idle}/messages`, { prompt: 'and now the docs' });
      expect(res.statusCode).toBe(202);
      expect(MessageAccepted.parse(res.json()).status).toBe('accepted');
    });

    it('POST /v1/threads/{id}/queue and /steer → 202 control submission', async () => {
      const { threadId: busy } = await harness.run(alice.user._id);
      const queued = await post(`/v1/threads/${busy}/queue`, { prompt: 'after that', client_request_id: 'c1' });
      expect(queued.statusCode).toBe(202);
      expect(ControlSubmission.parse(queued.json()).control).toMatchObject({ kind: 'queue', thread_id: busy });

      const steered = await post(`/v1/threads/${busy}/steer`, { prompt: 'focus on tests' });
      expect(steered.statusCode).toBe(202);
      expect(ControlSubmission.parse(steered.json())).toMatchObject({ control: { kind: 'steer' }, run: null });
    });

    it('GET /v1/threads/{id}/messages and /v1/tasks/{id}/messages page with cursor and limit', async () => {
      // Three messages: the first prompt and two more, each sent once the run before has ended.
      const id = await harness.idleThread(alice.user._id);
      for (const prompt of ['second', 'third']) {
        const sent = await post(`/v1/threads/${id}/messages`, { prompt });
        expect(sent.statusCode).toBe(202);
        await complete(MessageAccepted.parse(sent.json()).run_id);
      }
      for (const base of ['/v1/threads', '/v1/tasks']) {
        const first = await get(`${base}/${id}/messages?limit=2`);
        expect(first.statusCode).toBe(200);
        const page = MessagePage.parse(first.json());
        expect(page.messages).toHaveLength(2);
        expect(page.next_cursor).not.toBeNull();
        const second = MessagePage.parse((await get(`${base}/${id}/messages?cursor=${page.next_cursor}`)).json());
        expect(second).toMatchObject({ next_cursor: null });
        expect(second.messages).toHaveLength(1);
      }
      // An empty value means "not set", so the default limit applies.
      expect((await get(`/v1/threads/${id}/messages?limit=&cursor=`)).statusCode).toBe(200);
    });

    it('GET /v1/threads/{id}/controls and /v1/tasks/{id}/controls in their vocabularies', async () => {
      // Queued on an idle thread, a control is applied at once (its run admitted); a steer of that
      // run waits pending for a runner to take it.
      const id = await harness.idleThread(alice.user._id);
      expect((await post(`/v1/threads/${id}/queue`, { prompt: 'later' })).statusCode).toBe(202);
      expect((await post(`/v1/threads/${id}/steer`, { prompt: 'now' })).statusCode).toBe(202);
      const threadControls = await get(`/v1/threads/${id}/controls`);
      expect(threadControls.statusCode).toBe(200);
      expect(ControlList.parse(threadControls.json()).controls.map((c) => c.thread_id)).toEqual([id, id]);

      const pending = ControlList.parse((await get(`/v1/threads/${id}/controls?status=pending`)).json());
      expect(pending.controls.map((c) => c.status)).toEqual(['pending']);

      const taskControls = await get(`/v1/tasks/${id}/controls?status=applied`);
      expect(taskControls.statusCode).toBe(200);
      const controls = TaskControlList.parse(taskControls.json()).controls;
      expect(controls).toHaveLength(1);
      expect(controls[0]).toMatchObject({ task_id: id, status: 'applied' });
      expect(controls[0]).not.toHaveProperty('thread_id');
    });

    it('GET /v1/runs/{id}', async () => {
      const { run } = await harness.run(alice.user._id);
      const res = await get(`/v1/runs/${run.id}`);
      expect(res.statusCode).toBe(200);
      expect(Run.parse(res.json())).toMatchObject({ id: run.id, status: 'running', terminal: false });
    });

    it('POST /v1/runs/{id}/cancel → 202 when requested, 200 when already terminal', async () => {
      const { run: live } = await harness.run(alice.user._id);
      const requested = await post(`/v1/runs/${live.id}/cancel`);
      expect(requested.statusCode).toBe(202);
      expect(Run.parse(requested.json()).status).toBe('cancelling');

      const { run: done } = await harness.run(alice.user._id, 'completed');
      const unchanged = await post(`/v1/runs/${done.id}/cancel`);
      expect(unchanged.statusCode).toBe(200);
      expect(Run.parse(unchanged.json())).toMatchObject({ status: 'completed', terminal: true });

      // A client that always sends the JSON content type with no body is served the same.
      const withHeader = await app.inject({
        method: 'POST',
        url: `/v1/runs/${done.id}/cancel`,
        headers: { ...alice.headers, 'content-type': 'application/json' },
      });
      expect(withHeader.statusCode).toBe(200);
    });

    it('GET /v1/interactions/{id}, GET /v1/threads/{id}/interactions, POST /v1/interactions/{id}/answer', async () => {
      const { threadId, driver } = await harness.run(alice.user._id);
      const pending = await driver!.ask([question('q1', ['README.md', 'NOTES.md'])]);

      const one = await get(`/v1/interactions/${pending.id}`);
      expect(one.statusCode).toBe(200);
      expect(Interaction.parse(one.json())).toMatchObject({ id: pending.id, status: 'pending' });

      const list = await get(`/v1/threads/${threadId}/interactions?status=pending`);
      expect(list.statusCode).toBe(200);
      expect(InteractionList.parse(list.json()).interactions.map((i) => i.id)).toEqual([pending.id]);

      const answer = { action: 'answer', answers: { q1: { kind: 'options', optionIds: ['README.md'] } } };
      const settled = await post(`/v1/interactions/${pending.id}/answer`, answer);
      expect(settled.statusCode).toBe(200);
      expect(AnswerResult.parse(settled.json())).toMatchObject({ interactionId: pending.id, status: 'answered' });

      const again = await post(`/v1/interactions/${pending.id}/answer`, answer);
      expect(again.statusCode).toBe(409);
      expect(again.json()).toEqual({
        error: { code: 'already_settled', message: `interaction ${pending.id} is already answered` },
      });

      const none = await get(`/v1/threads/${threadId}/interactions?status=pending`);
      expect(InteractionList.parse(none.json()).interactions).toEqual([]);
    });
  });
});
