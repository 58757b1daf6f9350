import { connect } from 'node:net';
import { RunEventPage } from '@threadwork/contracts';
import { waitFor } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { firstLiveMessage } from '../src/clients/live.js';
import { alice, app, appendStored, harness, newRun, useEventsHarness, WAIT_GUARD_MS } from './run-events.js';

// The run event log through the gateway as long-polled pages, and the followers a user may hold.

describe('run events', () => {
  useEventsHarness();

  describe('per user', () => {
    it(
      'holds at most MAX_FOLLOWERS_PER_USER streams and long-polls open; past it 429, and a place frees as one ends',
      { timeout: WAIT_GUARD_MS },
      async () => {
        const gateway = await harness.gateway({ maxFollowersPerUser: 2 });
        const run = await newRun();
        const poll = () =>
          gateway.inject({ url: `/v1/runs/${run.id}/events?from=${run.from}&wait=30`, headers: alice.headers });
        const first = poll();
        await harness.pages.reached('run_id', run.id, 1);
        const second = poll();
        await harness.pages.reached('run_id', run.id, 2);
        const third = await poll();
        expect(third.statusCode).toBe(429);
        expect(third.json()).toMatchObject({ error: { code: 'too_many_streams' } });
        expect(third.headers['retry-after']).toBe('1');
        // Another user is not held back by this one.
        const bob = await harness.caller();
        const { run: theirs } = await harness.run(bob.user._id, 'completed');
        expect(
          (await gateway.inject({ url: `/v1/runs/${theirs.id}/events?wait=30`, headers: bob.headers })).statusCode,
        ).toBe(200);
        // An event ends both waits; their places are free again.
        await appendStored(run, { type: 'message.delta', item_id: 'm1', delta: 'hi' });
        expect((await first).statusCode).toBe(200);
        expect((await second).statusCode).toBe(200);
        const again = await gateway.inject({ url: `/v1/runs/${run.id}/events?from=1&wait=30`, headers: alice.headers });
        expect(again.statusCode).toBe(200);
      },
    );
  });

  describe('long-poll', () => {
    it('answers at once without wait, with one read', async () => {
      const run = await newRun();
      const res = await app.inject({ url: `/v1/runs/${run.id}/events?from=${run.from}`, headers: alice.headers });
      expect(res.statusCode).toBe(200);
      expect(RunEventPage.parse(res.json())).toEqual({
        events: [],
        next_sequence: run.from,
        status: 'running',
        terminal: false,
        error: null,
      });
      expect(await harness.pages.count('run_id', run.id)).toBe(1);
    });

    // Waits of 30 s (the most the API allows) against a shorter test timeout: a request that sat out
    // its wait instead of answering on the condition fails the test by timing out.
    it('wakes on the next stored event and reads the page again', { timeout: WAIT_GUARD_MS }, async () => {
      const run = await newRun();
      const pending = app.inject({ url: `/v1/runs/${run.id}/events?from=${run.from}&wait=30`, headers: alice.headers });
      // The first read was answered (empty: nothing was stored yet), so the gateway waits.
      await harness.pages.answered('run_id', run.id, 1);
      const stored = await appendStored(run, { type: 'message.delta', item_id: 'm1', delta: 'hi' });
      const res = await pending;
      expect(res.statusCode).toBe(200);
      const page = RunEventPage.parse(res.json());
      expect(page.events).toEqual([stored]);
      expect(page.next_sequence).toBe(stored.sequence + 1);
      expect(await harness.pages.count('run_id', run.id)).toBe(2);
    });

    it('answers an empty page once the wait is over', async () => {
      const run = await newRun();
      const started = Date.now();
      const res = await app.inject({
        url: `/v1/runs/${run.id}/events?from=${run.from}&wait=0.3`,
        headers: alice.headers,
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect(res.statusCode).toBe(200);
      expect(RunEventPage.parse(res.json())).toMatchObject({ events: [], next_sequence: run.from, terminal: false });
      expect(await harness.pages.count('run_id', run.id)).toBe(2);
    });

    it('never waits on a terminal run, nor when there is something to return', { timeout: WAIT_GUARD_MS }, async () => {
      const done = await newRun('completed');
      const res = await app.inject({
        url: `/v1/runs/${done.id}/events?from=${done.from}&wait=30`,
        headers: alice.headers,
      });
      expect(RunEventPage.parse(res.json())).toMatchObject({ events: [], status: 'completed', terminal: true });
      expect(await harness.pages.count('run_id', done.id)).toBe(1);

      const busy = await newRun();
      await appendStored(busy, { type: 'message.delta', item_id: 'm1', delta: 'a' });
      const page = await app.inject({
        url: `/v1/runs/${busy.id}/events?from=${busy.from}&wait=30`,
        headers: alice.headers,
      });
      expect(RunEventPage.parse(page.json()).events).toHaveLength(1);
    });

    it(
      'is answered when the gateway starts closing; a request after that is refused 503 unavailable',
      { timeout: WAIT_GUARD_MS },
      async () => {
        const other = await harness.gateway();
        const url = new URL(await other.listen({ port: 0, host: '127.0.0.1' }));
        const run = await newRun();
        // One connection, two requests: a long-poll that is waiting when closing begins, then one
        // sent on the same (busy, so not reaped as idle) connection once it has.
        const socket = connect(Number(url.port), url.hostname);
        let received = '';
        socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
        const get = (path: string) =>
          `GET ${path} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: ${alice.headers.authorization}\r\n\r\n`;
        socket.write(get(`/v1/runs/${run.id}/events?from=${run.from}&wait=30`));
        await harness.pages.reached('run_id', run.id, 1);

        const closed = other.close();
        await waitFor('the gateway to stop listening', () => !other.server.listening, 10_000, { intervalMs: 5 });
        socket.write(get(`/v1/runs/${run.id}`));
        await waitFor(
          'two answers',
          () => (received.match(/HTTP\/1\.1 /g) ?? []).length >= 2 && received.includes('shutting down'),
          10_000,
          { intervalMs: 10 },
        ).catch((err: Error) => {
          throw new Error(`${err.message}: ${received}`);
        });
        socket.destroy();
        await closed;

        const [first, second] = received.split(/(?=HTTP\/1\.1 )/);
        expect(first).toMatch(/^HTTP\/1\.1 200 /);
        expect(second).toMatch(/^HTTP\/1\.1 503 /);
        expect(second).toMatch(/^retry-after: 1$/im);
        expect(JSON.parse(second!.slice(second!.indexOf('\r\n\r\n') + 4))).toEqual({
          error: { code: 'unavailable', message: 'the server is shutting down; retry' },
        });
        // The long-poll (wait=30) answered when closing began: had it sat out its wait, this test
        // would have timed out first.
      },
    );

    it(
      'does not wait once the gateway is closing, even if closing began before the wait',
      { timeout: WAIT_GUARD_MS },
      async () => {
        const live = firstLiveMessage(harness.nc, (await newRun()).id);
        // Longer than this test may take: only not waiting at all passes.
        expect(await live.wait(10 * 60_000, AbortSignal.abort())).toBe(false);
        live.close();
      },
    );

    it('rejects a wait beyond 30 s naming the field', async () => {
      const run = await newRun();
      const res = await app.inject({ url: `/v1/runs/${run.id}/events?wait=31`, headers: alice.headers });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({
        error: { code: 'invalid_request', message: expect.stringMatching(/^querystring\.wait: /) },
      });
    });
  });
});
