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
import { question, RunDriver, uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULTS, SECRET } from './faulty-peers.js';
import { startHarness, type App, type Caller, type Harness } from './harness.js';

// Every route of the public contract against the real services: success statuses and shapes
// (each body parsed with its contract schema), then the error mapping.

describe('gateway routes', () => {
  let harness: Harness;
  let app: App;
  let alice: Caller;
  let bob: Caller;

  beforeAll(async () => {
    harness = await startHarness({ repositories: ['alpha', 'beta'] });
    app = harness.app;
    alice = await harness.caller();
    bob = await harness.caller();
  });
  afterAll(async () => {
    await harness?.close();
  });

  const get = (url: string, who: Caller = alice, headers: Record<string, string> = {}) =>
    app.inject({ url, headers: { ...who.headers, ...headers } });
  const post = (url: string, payload?: unknown, who: Caller = alice) =>
    app.inject({
      method: 'POST',
      url,
      headers: who.headers,
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
    });

  const alpha = () => harness.repositories.get('alpha')!;
  const beta = () => harness.repositories.get('beta')!;

  /** A run admitted by the gateway's answer, taken through to completion as a runner would. */
  const complete = async (runId: string) => {
    const driver = await (await RunDriver.claim(harness.nc, runId)).start();
    await driver.to('completed');
  };

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

  describe('400 names the offending field', () => {
    const expect400 = async (res: Awaited<ReturnType<typeof get>>, message: RegExp) => {
      expect(res.statusCode).toBe(400);
      const body = res.json<{ error: { code: string; message: string } }>();
      expect(body.error.code).toBe('invalid_request');
      expect(body.error.message).toMatch(message);
    };

    it('a prompt of 4097 characters', async () => {
      await expect400(
        await post('/v1/tasks', { repository_id: 1, prompt: 'x'.repeat(4097) }),
        /^body\.prompt: Too big/,
      );
    });

    it('repository_id 0', async () => {
      await expect400(await post('/v1/tasks', { repository_id: 0, prompt: 'hi' }), /^body\.repository_id: Too small/);
      await expect400(
        await post('/v1/threads', { repository_id: 1, repository_ids: [1, -2], prompt: 'hi' }),
        /^body\.repository_ids\.1: /,
      );
    });

    it('an unknown property on create-task', async () => {
      await expect400(
        await post('/v1/tasks', { repository_id: 1, prompt: 'hi', color: 'red' }),
        /^body\.color: unknown property$/,
      );
    });

    it('a path id of 257 characters', async () => {
      await expect400(await get(`/v1/threads/${'a'.repeat(257)}`), /^params\.id: Too big/);
      await expect400(await get(`/v1/runs/${'a'.repeat(257)}/events`), /^params\.id: /);
    });

    it('query values out of range', async () => {
      const { threadId: id } = await harness.thread(alice.user._id);
      await expect400(await get(`/v1/threads/${id}/messages?limit=201`), /^querystring\.limit: /);
      await expect400(await get(`/v1/threads/${id}/controls?status=done`), /^querystring\.status: /);
      await expect400(await get(`/v1/repohost/repositories?q=${'q'.repeat(257)}`), /^querystring\.q: Too big/);
    });

    it('a missing, empty or malformed body', async () => {
      await expect400(await post('/v1/tasks'), /^body: /);
      await expect400(await post('/v1/tasks', { prompt: 'hi' }), /^body\.repository_id: /);
      const malformed = await app.inject({
        method: 'POST',
        url: '/v1/tasks',
        headers: { ...alice.headers, 'content-type': 'application/json' },
        payload: '{"repository_id": 1,',
      });
      await expect400(malformed, /^body: not valid JSON$/);
      const wrongType = await app.inject({
        method: 'POST',
        url: '/v1/tasks',
        headers: { ...alice.headers, 'content-type': 'application/xml' },
        payload: '<task/>',
      });
      await expect400(wrongType, /^headers\.content-type: /);
    });

    it('an answer of an unknown action', async () => {
      await expect400(await post('/v1/interactions/int_x/answer', { action: 'shrug' }), /^body\.action: /);
    });
  });

  describe('404', () => {
    it("for anything that is not the caller's", async () => {
      const { threadId: theirs, runId } = await harness.thread(bob.user._id);
      const res = await get(`/v1/threads/${theirs}`);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: { code: 'not_found', message: 'thread not found' } });
      expect((await get(`/v1/threads/${theirs}`, bob)).statusCode).toBe(200);

      expect((await post(`/v1/runs/${runId}/cancel`)).statusCode).toBe(404);
      expect((await get(`/v1/runs/${runId}/events`)).statusCode).toBe(404);
      expect((await get(`/v1/tasks/thr_missing`)).statusCode).toBe(404);
    });

    it('for a path id that cannot be a subject token', async () => {
      for (const url of [
        '/v1/runs/run.1',
        '/v1/runs/a.b/events?wait=1',
        '/v1/runs/run.x/events/stream',
        '/v1/threads/a%20b',
        '/v1/interactions/int*',
      ]) {
        const res = await get(url);
        expect(res.statusCode, url).toBe(404);
        expect(res.json()).toMatchObject({ error: { code: 'not_found' } });
      }
    });

    it('for a route that does not exist', async () => {
      const res = await get('/v1/nothing/here');
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: { code: 'not_found', message: 'no such route' } });
    });
  });

  describe('409', () => {
    it.each([
      [
        'thread_busy',
        async (c: Caller) =>
          post(`/v1/threads/${(await harness.thread(c.user._id)).threadId}/messages`, { prompt: 'hi' }),
      ],
      [
        'no_active_run',
        async (c: Caller) => post(`/v1/threads/${await harness.idleThread(c.user._id)}/steer`, { prompt: 'hi' }),
      ],
      [
        'idempotency_conflict',
        async () => {
          // The same client_request_id again with another body.
          const client_request_id = uniqueId('reused');
          expect(
            (await post('/v1/threads', { repository_id: alpha(), prompt: 'hi', client_request_id })).statusCode,
          ).toBe(202);
          return post('/v1/threads', { repository_id: alpha(), prompt: 'hi again', client_request_id });
        },
      ],
    ])('%s', async (code, act) => {
      const res = await act(alice);
      expect(res.statusCode).toBe(409);
      expect(res.json()).toMatchObject({ error: { code } });
    });
  });

  it('gives each request an id of its own, answered in X-Request-Id and carried to the services it calls', async () => {
    // A write with a body over a real connection: the handler runs after the body has arrived
    // on the socket, and still as the request.
    const served = await harness.gateway();
    const url = await served.listen({ port: 0, host: '127.0.0.1' });
    const send = (prompt: string) =>
      fetch(`${url}/v1/threads`, {
        method: 'POST',
        headers: { ...alice.headers, 'content-type': 'application/json' },
        body: JSON.stringify({ repository_id: alpha(), prompt }),
      });
    const first = await send('hi');
    const second = await send('hi again');
    expect(first.status).toBe(202);
    const ids = [first.headers.get('x-request-id'), second.headers.get('x-request-id')];
    expect(ids[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(ids[1]).not.toBe(ids[0]);
    expect((await harness.creates.seen()).map((r) => r.requestId).slice(-2)).toEqual(ids);
    // A client's own id is not taken.
    const chosen = await app.inject({
      method: 'POST',
      url: '/v1/threads',
      headers: { ...alice.headers, 'x-request-id': 'mine' },
      payload: { repository_id: alpha(), prompt: 'hi' },
    });
    expect(chosen.headers['x-request-id']).not.toBe('mine');
  });

  describe('a service that goes wrong', () => {
    // The real services do not fail this way on purpose: faulty stand-ins on a server of their own.
    let faulty: Harness;
    let carol: Caller;

    beforeAll(async () => {
      faulty = await startHarness({ peers: 'faulty' });
      carol = await faulty.caller();
    });
    afterAll(async () => {
      await faulty?.close();
    });

    const faultyGet = (url: string) => faulty.app.inject({ url, headers: carol.headers });

    describe('500 hides what went wrong', () => {
      it('when a service fails unexpectedly', async () => {
        const res = await faultyGet(`/v1/threads/${FAULTS.boom}`);
        expect(res.statusCode).toBe(500);
        expect(res.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
        expect(res.body).not.toContain(SECRET);
      });

      it('when a service answers `internal` with a message of its own: the code, and the request id to quote', async () => {
        const res = await faultyGet(`/v1/threads/${FAULTS.internalWithText}`);
        expect(res.statusCode).toBe(500);
        expect(res.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
        expect(res.body).not.toContain(SECRET);
        expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
      });

      it('when a service answers a shape the contract does not allow', async () => {
        const res = await faultyGet(`/v1/threads/${FAULTS.malformed}`);
        expect(res.statusCode).toBe(500);
        expect(res.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
        expect(res.body).not.toMatch(/expected|at |\.ts/);
      });
    });

    it('503 when a service does not answer in time', async () => {
      const quick = await faulty.gateway({ requestTimeoutMs: 150 });
      const res = await quick.inject({ url: `/v1/runs/${FAULTS.slowRun}`, headers: carol.headers });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ error: { code: 'unavailable' } });
      expect(res.headers['retry-after']).toBe('1');
    });
  });

  it('413 above the body limit', async () => {
    const res = await post('/v1/tasks', { repository_id: 1, prompt: 'x'.repeat(Math.ceil(1.1 * 1024 * 1024)) });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({
      error: { code: 'payload_too_large', message: `request body is larger than ${1024 * 1024} bytes` },
    });
  });
});
