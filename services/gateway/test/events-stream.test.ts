import { once } from 'node:events';
import { get, type IncomingMessage } from 'node:http';
import { waitFor } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { frameReader } from './sse-reader.js';
import {
  alice,
  app,
  appendStored,
  appendUnseen,
  baseUrl,
  finish,
  harness,
  liveEvent,
  newRun,
  publishLive,
  storedEvent,
  useEventsHarness,
} from './run-events.js';

// The run event log through the gateway as a Server-Sent Events stream.

describe('run events', () => {
  useEventsHarness();

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
      await waitFor('the server to see the client go away', async () => (await connections()) < whileOpen, 5_000, {
        intervalMs: 10,
      });
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
