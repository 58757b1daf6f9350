import { once } from 'node:events';
import { get, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { RunEventPage, runEventsStream, subjects, type RunEvent } from '@threadwork/contracts';
import {
  encodeJson,
  ensureStream,
  jetStreamOf,
  natsHeaders,
  publishJson,
  type JetStreamClient,
} from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstLiveMessage } from '../src/handlers/live.js';
import { event, now } from './fixtures.js';
import { startHarness, type App, type Caller, type Harness } from './harness.js';

/** Shorter than the longest wait (30 s): a long-poll that sat out its wait times the test out. */
const WAIT_GUARD_MS = 25_000;

// The run event log through the gateway: long-polled pages and the Server-Sent Events stream,
// woken by messages on `run.live.<runId>` — from a real RUN_EVENTS stream's republish, and
// published by hand where a test needs a sequence the stream would not produce (a gap).

interface Frame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
  retry?: string;
}

/** Reads SSE frames off a fetch body, one at a time. */
function frameReader(body: ReadableStream<Uint8Array>) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  return {
    async next(): Promise<Frame | null> {
      for (;;) {
        const end = buffer.indexOf('\n\n');
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const frame: Frame = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) frame.comment = line.slice(1).trim();
            const colon = line.indexOf(': ');
            if (colon > 0) frame[line.slice(0, colon) as 'id' | 'event' | 'data' | 'retry'] = line.slice(colon + 2);
          }
          return frame;
        }
        const { value, done } = await reader.read();
        if (done) return null;
        buffer += decoder.decode(value, { stream: true });
      }
    },
    /** Events until `end`, skipping the retry preamble and comments. */
    async until(count: number): Promise<Frame[]> {
      const frames: Frame[] = [];
      while (frames.length < count) {
        const frame = await this.next();
        if (!frame) break;
        if (frame.event) frames.push(frame);
      }
      return frames;
    },
    cancel: () => reader.cancel(),
  };
}

describe('run events', () => {
  let harness: Harness;
  let app: App;
  let alice: Caller;
  let js: JetStreamClient;
  let baseUrl: string;

  beforeAll(async () => {
    harness = await startHarness();
    app = harness.app;
    alice = await harness.caller();
    const handles = await jetStreamOf(harness.nc);
    js = handles.js;
    await ensureStream(handles.jsm, runEventsStream({ maxAgeMs: 0 }));
    baseUrl = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await harness?.close();
  });

  const newRun = (status: Parameters<Harness['world']['addRun']>[2] = 'running') =>
    harness.world.addRun(alice.user._id, harness.world.addThread(alice.user._id), status);
  const logOf = (runId: string) => harness.world.logs.get(runId)!;

  /** Stores an event the way the runs service does: in the log first, then on the live subject. */
  async function appendStored(runId: string, chunk: Record<string, unknown>): Promise<RunEvent> {
    const created_at = now();
    const ack = await publishJson(js, subjects.runEvents(runId), { chunk, created_at });
    const stored = { sequence: ack.seq, chunk, created_at };
    logOf(runId).events.push(stored);
    return stored;
  }

  /** Publishes a live message by hand, with the headers RUN_EVENTS' republish sets. */
  function publishLive(runId: string, stored: RunEvent, previous: number): void {
    const headers = natsHeaders();
    headers.set('Nats-Sequence', String(stored.sequence));
    headers.set('Nats-Last-Sequence', String(previous));
    harness.nc.publish(subjects.runLive(runId), encodeJson({ chunk: stored.chunk, created_at: stored.created_at }), {
      headers,
    });
  }

  describe('per user', () => {
    it(
      'holds at most MAX_FOLLOWERS_PER_USER streams and long-polls open; past it 429, and a place frees as one ends',
      { timeout: WAIT_GUARD_MS },
      async () => {
        const gateway = await harness.gateway({ maxFollowersPerUser: 2 });
        const run = newRun();
        const poll = () => gateway.inject({ url: `/v1/runs/${run.id}/events?wait=30`, headers: alice.headers });
        const first = poll();
        await harness.world.pageCalled(run.id, 1);
        const second = poll();
        await harness.world.pageCalled(run.id, 2);
        const third = await poll();
        expect(third.statusCode).toBe(429);
        expect(third.json()).toMatchObject({ error: { code: 'rate_limited' } });
        expect(third.headers['retry-after']).toBe('1');
        // Another user is not held back by this one.
        const bob = await harness.caller();
        const theirs = harness.world.addRun(bob.user._id, harness.world.addThread(bob.user._id), 'completed');
        expect(
          (await gateway.inject({ url: `/v1/runs/${theirs.id}/events?wait=30`, headers: bob.headers })).statusCode,
        ).toBe(200);
        // An event ends both waits; their places are free again.
        await appendStored(run.id, { type: 'message.delta', item_id: 'm1', delta: 'hi' });
        expect((await first).statusCode).toBe(200);
        expect((await second).statusCode).toBe(200);
        const again = await gateway.inject({ url: `/v1/runs/${run.id}/events?from=1&wait=30`, headers: alice.headers });
        expect(again.statusCode).toBe(200);
      },
    );
  });

  describe('long-poll', () => {
    it('answers at once without wait, with one read', async () => {
      const run = newRun();
      const res = await app.inject({ url: `/v1/runs/${run.id}/events?from=5`, headers: alice.headers });
      expect(res.statusCode).toBe(200);
      expect(RunEventPage.parse(res.json())).toEqual({
        events: [],
        next_sequence: 5,
        status: 'running',
        terminal: false,
        error: null,
      });
      expect(harness.world.pageCalls.get(run.id)).toBe(1);
    });

    // Waits of 30 s (the most the API allows) against a shorter test timeout: a request that sat out
    // its wait instead of answering on the condition fails the test by timing out.
    it('wakes on the next stored event and reads the page again', { timeout: WAIT_GUARD_MS }, async () => {
      const run = newRun();
      const pending = app.inject({ url: `/v1/runs/${run.id}/events?wait=30`, headers: alice.headers });
      // The first (empty) read means the gateway has subscribed already.
      await harness.world.pageCalled(run.id, 1);
      const stored = await appendStored(run.id, { type: 'message.delta', item_id: 'm1', delta: 'hi' });
      const res = await pending;
      expect(res.statusCode).toBe(200);
      const page = RunEventPage.parse(res.json());
      expect(page.events).toEqual([stored]);
      expect(page.next_sequence).toBe(stored.sequence + 1);
      expect(harness.world.pageCalls.get(run.id)).toBe(2);
    });

    it('answers an empty page once the wait is over', async () => {
      const run = newRun();
      const started = Date.now();
      const res = await app.inject({ url: `/v1/runs/${run.id}/events?from=3&wait=0.3`, headers: alice.headers });
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect(res.statusCode).toBe(200);
      expect(RunEventPage.parse(res.json())).toMatchObject({ events: [], next_sequence: 3, terminal: false });
      expect(harness.world.pageCalls.get(run.id)).toBe(2);
    });

    it('never waits on a terminal run, nor when there is something to return', { timeout: WAIT_GUARD_MS }, async () => {
      const done = newRun('completed');
      const res = await app.inject({ url: `/v1/runs/${done.id}/events?wait=30`, headers: alice.headers });
      expect(RunEventPage.parse(res.json())).toMatchObject({ events: [], status: 'completed', terminal: true });
      expect(harness.world.pageCalls.get(done.id)).toBe(1);

      const busy = newRun();
      await appendStored(busy.id, { type: 'message.delta', item_id: 'm1', delta: 'a' });
      const page = await app.inject({ url: `/v1/runs/${busy.id}/events?wait=30`, headers: alice.headers });
      expect(RunEventPage.parse(page.json()).events).toHaveLength(1);
    });

    it(
      'is answered when the gateway starts closing; a request after that is refused 503 unavailable',
      { timeout: WAIT_GUARD_MS },
      async () => {
        const other = await harness.gateway();
        const url = new URL(await other.listen({ port: 0, host: '127.0.0.1' }));
        const run = newRun();
        // One connection, two requests: a long-poll that is waiting when closing begins, then one
        // sent on the same (busy, so not reaped as idle) connection once it has.
        const socket = connect(Number(url.port), url.hostname);
        let received = '';
        socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
        const get = (path: string) =>
          `GET ${path} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: ${alice.headers.authorization}\r\n\r\n`;
        socket.write(get(`/v1/runs/${run.id}/events?wait=30`));
        await harness.world.pageCalled(run.id, 1);

        const closed = other.close();
        while (other.server.listening) await new Promise((resolve) => setTimeout(resolve, 5));
        socket.write(get(`/v1/runs/${run.id}`));
        const deadline = Date.now() + 10_000;
        while ((received.match(/HTTP\/1\.1 /g) ?? []).length < 2 || !received.includes('shutting down')) {
          if (Date.now() > deadline) throw new Error(`two answers did not come: ${received}`);
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
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
        const live = firstLiveMessage(harness.nc, newRun().id);
        // Longer than this test may take: only not waiting at all passes.
        expect(await live.wait(10 * 60_000, AbortSignal.abort())).toBe(false);
        live.close();
      },
    );

    it('rejects a wait beyond 30 s naming the field', async () => {
      const run = newRun();
      const res = await app.inject({ url: `/v1/runs/${run.id}/events?wait=31`, headers: alice.headers });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({
        error: { code: 'invalid_request', message: expect.stringMatching(/^querystring\.wait: /) },
      });
    });
  });

  describe('Server-Sent Events', () => {
    const open = (runId: string, headers: Record<string, string> = {}, query = '') =>
      fetch(`${baseUrl}/v1/runs/${runId}/events/stream${query}`, { headers: { ...alice.headers, ...headers } });

    it('sends stored events, then live ones (repaging over a gap), then end', async () => {
      const run = newRun();
      const first = await appendStored(run.id, { type: 'run.status', status: 'running', previous: 'starting' });
      const second = await appendStored(run.id, { type: 'message.delta', item_id: 'm1', delta: 'Hel' });

      const res = await open(run.id);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const frames = frameReader(res.body!);

      const paged = await frames.until(2);
      expect(paged.map((f) => [f.id, f.event])).toEqual([
        [String(first.sequence), 'run.status'],
        [String(second.sequence), 'message.delta'],
      ]);
      expect(JSON.parse(paged[1]!.data!)).toEqual(second);

      // Live: stored by the real stream, republished with its sequence headers.
      const third = await appendStored(run.id, { type: 'message.delta', item_id: 'm1', delta: 'lo' });
      const [live] = await frames.until(1);
      expect(live).toMatchObject({ id: String(third.sequence), event: 'message.delta' });
      expect(JSON.parse(live!.data!)).toEqual(third);

      // A gap: the live message for 101 never reaches the gateway, 102 says its predecessor was 101.
      const missed = event(101, { type: 'message.completed', item_id: 'm1', text: 'Hello' });
      const next = event(102, { type: 'usage', inputTokens: 10, outputTokens: 5 });
      logOf(run.id).events.push(missed, next);
      publishLive(run.id, next, 101);
      const repaged = await frames.until(2);
      expect(repaged.map((f) => f.id)).toEqual(['101', '102']);

      // The final status arrives live; nothing follows it in the log, so the stream ends.
      const last = event(103, { type: 'run.status', status: 'completed', previous: 'running' });
      logOf(run.id).events.push(last);
      logOf(run.id).status = 'completed';
      publishLive(run.id, last, 102);
      const ending = await frames.until(2);
      expect(ending.map((f) => [f.id, f.event])).toEqual([
        ['103', 'run.status'],
        [undefined, 'end'],
      ]);
      expect(ending[1]!.data).toBe('{}');
      expect(await frames.next()).toBeNull();

      // Resuming after a sequence replays only what follows it, then ends (the run is done).
      const resumed = frameReader((await open(run.id, { 'last-event-id': '101' })).body!);
      expect((await resumed.until(3)).map((f) => f.id ?? f.event)).toEqual(['102', '103', 'end']);
      // `?from=` wins over Last-Event-ID.
      const fromQuery = frameReader((await open(run.id, { 'last-event-id': '101' }, '?from=103')).body!);
      expect((await fromQuery.until(2)).map((f) => f.id ?? f.event)).toEqual(['103', 'end']);
    });

    it('skips live events it already sent from a page', async () => {
      const run = newRun();
      const stored = await appendStored(run.id, { type: 'message.delta', item_id: 'm1', delta: 'x' });
      const frames = frameReader((await open(run.id)).body!);
      expect((await frames.until(1)).map((f) => f.id)).toEqual([String(stored.sequence)]);
      // The same event again on the live subject, then a terminal one after it.
      publishLive(run.id, stored, stored.sequence - 1);
      const last = event(stored.sequence + 1000, { type: 'run.status', status: 'failed' });
      logOf(run.id).events.push(last);
      logOf(run.id).status = 'failed';
      publishLive(run.id, last, stored.sequence);
      expect((await frames.until(2)).map((f) => f.id ?? f.event)).toEqual([String(last.sequence), 'end']);
    });

    it('ends at once for a terminal run whose log is drained', async () => {
      const run = newRun('cancelled');
      const res = await open(run.id);
      const frames = frameReader(res.body!);
      expect(await frames.next()).toEqual({ retry: '3000' });
      expect(await frames.until(1)).toEqual([{ event: 'end', data: '{}' }]);
      expect(await frames.next()).toBeNull();
    });

    it('answers JSON errors before the stream starts', async () => {
      const theirs = harness.world.addRun('usr_someone_else', 'thr_theirs');
      const res = await open(theirs.id);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: { code: 'not_found', message: 'run not found' } });

      const bad = await open(newRun().id, { 'last-event-id': 'yesterday' });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({
        error: { message: expect.stringMatching(/^headers\.last-event-id: /) },
      });

      const anonymous = await fetch(`${baseUrl}/v1/runs/${theirs.id}/events/stream`);
      expect(anonymous.status).toBe(401);
    });

    it('pings idle streams, and ends them with an error frame when the gateway shuts down', async () => {
      const other = await harness.gateway({ heartbeatMs: 30 });
      const url = await other.listen({ port: 0, host: '127.0.0.1' });
      const run = newRun();
      const res = await fetch(`${url}/v1/runs/${run.id}/events/stream`, { headers: alice.headers });
      const frames = frameReader(res.body!);
      expect(await frames.next()).toEqual({ retry: '3000' });
      expect(await frames.next()).toEqual({ comment: 'ping' });
      expect(await frames.next()).toEqual({ comment: 'ping' });
      await other.close();
      const [last] = await frames.until(1);
      expect(last).toMatchObject({ event: 'error' });
      expect(JSON.parse(last!.data!)).toMatchObject({ error: { code: 'unavailable' } });
      expect(await frames.next()).toBeNull();
    });

    it('stops following the run when the client goes away', async () => {
      const run = newRun();
      // node:http rather than fetch: destroying the request closes the socket at once.
      const request = get(`${baseUrl}/v1/runs/${run.id}/events/stream`, { headers: alice.headers });
      const response = await new Promise<IncomingMessage>((resolve, reject) => {
        request.once('response', resolve);
        request.once('error', reject);
      });
      expect(response.statusCode).toBe(200);
      const [preamble] = (await once(response, 'data')) as [Buffer];
      expect(preamble.toString()).toBe('retry: 3000\n\n');
      expect(harness.world.pageCalls.get(run.id)).toBe(1);
      const connections = () =>
        new Promise<number>((resolve, reject) =>
          app.server.getConnections((err, count) => (err ? reject(err) : resolve(count))),
        );
      const whileOpen = await connections();
      request.destroy();

      // Bounded wait for the server to see the stream's socket close (others stay in keep-alive).
      const deadline = Date.now() + 5_000;
      while ((await connections()) >= whileOpen) {
        if (Date.now() > deadline) throw new Error('the server did not see the client go away');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      // A live message with a gap would make a follower read a page; nobody does any more. The
      // GET afterwards travels the same connection to the same double, so an eventsPage request
      // sent because of the live message would have been answered before it.
      publishLive(run.id, event(50, { type: 'message.delta', item_id: 'm', delta: 'late' }), 49);
      await harness.nc.flush();
      expect((await app.inject({ url: `/v1/runs/${run.id}`, headers: alice.headers })).statusCode).toBe(200);
      expect(harness.world.pageCalls.get(run.id)).toBe(1);
    });
  });
});
