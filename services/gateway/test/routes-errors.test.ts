import { uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FAULTS, SECRET } from './faulty-peers.js';
import { startHarness, type Caller, type Harness } from './harness.js';
import { alice, alpha, app, bob, get, harness, post, useRoutesHarness } from './routes-harness.js';

// Every route of the public contract against the real services: the error mapping, and the request id
// each answer carries.

describe('gateway routes', () => {
  useRoutesHarness();

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
