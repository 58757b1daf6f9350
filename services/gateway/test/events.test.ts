import { once } from 'node:events';
import { get, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { RunEventPage, STREAM_NAMES, subjects, type RunEvent } from '@threadwork/contracts';
import { encodeJson, jetStreamOf, natsHeaders, type JetStreamManager } from '@threadwork/platform';
import type { RunDriver } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { firstLiveMessage } from '../src/clients/live.js';
import { startHarness, type App, type Caller, type DrivableStatus, type Harness } from './harness.js';

/** Shorter than the longest wait (30 s): a long-poll that sat out its wait times the test out. */
const WAIT_GUARD_MS = 25_000;

// The run event log through the gateway: long-polled pages and the Server-Sent Events stream,
// woken by messages on `run.live.<runId>` — from the runs service's RUN_EVENTS stream's republish,
// with runs moved and events appended as a runner does (RunDriver), and live messages published by
// hand where a test needs one the stream would not send (a repeat, a late one).

/** An event of no run's log, for a live message by hand. */
const liveEvent = (sequence: number, chunk: Record<string, unknown>): RunEvent => ({
  sequence,
  chunk,
  created_at: new Date().toISOString(),
});

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
  let jsm: JetStreamManager;
  let baseUrl: string;

  beforeAll(async () => {
    harness = await startHarness();
    app = harness.app;
    alice = await harness.caller();
    jsm = (await jetStreamOf(harness.nc)).jsm;
    baseUrl = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await harness?.close();
  });

  /** The event the runs service stored at `sequence`, as a page shows it. */
  async function storedEvent(sequence: number): Promise<RunEvent> {
    const message = await jsm.streams.getMessage(STREAM_NAMES.runEvents, { seq: sequence });
    if (!message) throw new Error(`RUN_EVENTS holds nothing at ${sequence}`);
    const { chunk, created_at } = message.json<{ chunk: Record<string, unknown>; created_at: string }>();
    return { sequence, chunk, created_at };
  }

  /** The sequence of the last event of the run's log. */
  async function lastSequence(runId: string): Promise<number> {
    const last = await jsm.streams.getMessage(STREAM_NAMES.runEvents, { last_by_subj: subjects.runEvents(runId) });
    if (!last) throw new Error(`the log of ${runId} is empty`);
    return last.seq;
  }

  interface TestRun {
    id: string;
    /** The runner's stand-in holding the run (none for a run cancelled before a runner took it). */
    driver: RunDriver | null;
    /** The sequence after the last event of the run's log so far (its status moves are in it). */
    from: number;
  }

  /** Alice's new run, moved to `status`; `from` is where a read of only what comes next starts. */
  async function newRun(status: DrivableStatus = 'running'): Promise<TestRun> {
    const { run, driver } = await harness.run(alice.user._id, status);
    return { id: run.id, driver, from: (await lastSequence(run.id)) + 1 };
  }

  /** Appends an event as the runner does; the runs service stores it, then it goes out live. */
  async function appendStored(run: TestRun, chunk: Record<string, unknown>): Promise<RunEvent> {
    const [sequence] = await run.driver!.append(chunk);
    return storedEvent(sequence!);
  }

  /** Ends the run as its runner does; returns the `run.status` event that closes its log. */
  async function finish(run: TestRun, status: 'completed' | 'failed'): Promise<RunEvent> {
    const error = status === 'failed' ? { error: { code: 'harness_error', message: 'the harness failed' } } : {};
    await run.driver!.to(status, error);
    return storedEvent(await lastSequence(run.id));
  }

  /**
   * Appends events whose live messages are lost on the way: RUN_EVENTS republishes none while they
   * are stored (its republish pointed at no run), so a follower learns of them only from the next
   * live message's Nats-Last-Sequence, as when a live message is dropped.
   */
  async function appendUnseen(run: TestRun, ...chunks: Record<string, unknown>[]): Promise<RunEvent[]> {
    const { config } = await jsm.streams.info(STREAM_NAMES.runEvents);
    await jsm.streams.update(STREAM_NAMES.runEvents, {
      ...config,
      republish: { ...config.republish!, src: subjects.runEvents('run_nobody'), dest: subjects.runLive('run_nobody') },
    });
    try {
      const sequences = await run.driver!.append(...chunks);
      return await Promise.all(sequences.map(storedEvent));
    } finally {
      await jsm.streams.update(STREAM_NAMES.runEvents, config);
    }
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
        const run = await newRun();
        const poll = () =>
          gateway.inject({ url: `/v1/runs/${run.id}/events?from=${run.from}&wait=30`, headers: alice.headers });
        const first = poll();
        await harness.pages.reached('run_id', run.id, 1);
        const second = poll();
        await harness.pages.reached('run_id', run.id, 2);
        const third = await poll();
        expect(third.statusCode).toBe(429);
        expect(third.json()).toMatchObject({ error: { code: 'rate_limited' } });
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
      // The first (empty) read means the gateway has subscribed already.
      await harness.pages.reached('run_id', run.id, 1);
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

  describe('Server-Sent Events', () => {
    const open = (runId: string, headers: Record<string, string> = {}, query = '') =>
      fetch(`${baseUrl}/v1/runs/${runId}/events/stream${query}`, { headers: { ...alice.headers, ...headers } });

    it('sends stored events, then live ones (repaging over a gap), then end', async () => {
      const run = await newRun();
      // The run's own last move (to running) is its last stored event so far.
      const first = await storedEvent(run.from - 1);
      const second = await appendStored(run, { type: 'message.delta', item_id: 'm1', delta: 'Hel' });

      const res = await open(run.id, {}, `?from=${first.sequence}`);
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
      const third = await appendStored(run, { type: 'message.delta', item_id: 'm1', delta: 'lo' });
      const [live] = await frames.until(1);
      expect(live).toMatchObject({ id: String(third.sequence), event: 'message.delta' });
      expect(JSON.parse(live!.data!)).toEqual(third);

      // A gap: the live message of `missed` never reaches the gateway, `next`'s says its
      // predecessor was `missed`.
      const [missed] = await appendUnseen(run, { type: 'message.completed', item_id: 'm1', text: 'Hello' });
      const [next] = await appendUnseen(run, { type: 'usage', inputTokens: 10, outputTokens: 5 });
      publishLive(run.id, next!, missed!.sequence);
      const repaged = await frames.until(2);
      expect(repaged.map((f) => f.id)).toEqual([String(missed!.sequence), String(next!.sequence)]);

      // The final status arrives live; nothing follows it in the log, so the stream ends.
      const last = await finish(run, 'completed');
      const ending = await frames.until(2);
      expect(ending.map((f) => [f.id, f.event])).toEqual([
        [String(last.sequence), 'run.status'],
        [undefined, 'end'],
      ]);
      expect(ending[1]!.data).toBe('{}');
      expect(await frames.next()).toBeNull();

      // Resuming after a sequence replays only what follows it, then ends (the run is done).
      const afterMissed = { 'last-event-id': String(missed!.sequence) };
      const resumed = frameReader((await open(run.id, afterMissed)).body!);
      expect((await resumed.until(3)).map((f) => f.id ?? f.event)).toEqual([
        String(next!.sequence),
        String(last.sequence),
        'end',
      ]);
      // `?from=` wins over Last-Event-ID.
      const fromQuery = frameReader((await open(run.id, afterMissed, `?from=${last.sequence}`)).body!);
      expect((await fromQuery.until(2)).map((f) => f.id ?? f.event)).toEqual([String(last.sequence), 'end']);
    });

    it('skips live events it already sent from a page', async () => {
      const run = await newRun();
      const stored = await appendStored(run, { type: 'message.delta', item_id: 'm1', delta: 'x' });
      const frames = frameReader((await open(run.id, {}, `?from=${run.from}`)).body!);
      expect((await frames.until(1)).map((f) => f.id)).toEqual([String(stored.sequence)]);
      // The same event again on the live subject, then a terminal one after it.
      publishLive(run.id, stored, stored.sequence - 1);
      const last = await finish(run, 'failed');
      expect((await frames.until(2)).map((f) => f.id ?? f.event)).toEqual([String(last.sequence), 'end']);
    });

    it('ends at once for a terminal run whose log is drained', async () => {
      const run = await newRun('cancelled');
      const res = await open(run.id, {}, `?from=${run.from}`);
      const frames = frameReader(res.body!);
      expect(await frames.next()).toEqual({ retry: '3000' });
      expect(await frames.until(1)).toEqual([{ event: 'end', data: '{}' }]);
      expect(await frames.next()).toBeNull();
    });

    it('answers JSON errors before the stream starts', async () => {
      const { run: theirs } = await harness.run('usr_someone_else', 'queued');
      const res = await open(theirs.id);
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: { code: 'not_found', message: 'run not found' } });

      const bad = await open((await newRun()).id, { 'last-event-id': 'yesterday' });
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
      const run = await newRun();
      const res = await fetch(`${url}/v1/runs/${run.id}/events/stream?from=${run.from}`, { headers: alice.headers });
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
      const run = await newRun();
      // node:http rather than fetch: destroying the request closes the socket at once.
      const request = get(`${baseUrl}/v1/runs/${run.id}/events/stream?from=${run.from}`, { headers: alice.headers });
      const response = await new Promise<IncomingMessage>((resolve, reject) => {
        request.once('response', resolve);
        request.once('error', reject);
      });
      expect(response.statusCode).toBe(200);
      const [preamble] = (await once(response, 'data')) as [Buffer];
      expect(preamble.toString()).toBe('retry: 3000\n\n');
      expect(await harness.pages.count('run_id', run.id)).toBe(1);
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
      // GET afterwards travels the same connection to the runs service, so an eventsPage request
      // sent because of the live message would have been sent before it.
      publishLive(
        run.id,
        liveEvent(run.from + 1000, { type: 'message.delta', item_id: 'm', delta: 'late' }),
        run.from + 999,
      );
      await harness.nc.flush();
      expect((await app.inject({ url: `/v1/runs/${run.id}`, headers: alice.headers })).statusCode).toBe(200);
      expect(await harness.pages.count('run_id', run.id)).toBe(1);
    });
  });
});
