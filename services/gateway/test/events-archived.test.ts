import { RunEventPage, runEventLayout } from '@threadwork/contracts';
import { jetStreamOf, type JetStreamManager } from '@threadwork/platform';
import { waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type App, type Caller, type Harness } from './harness.js';
import { frameReader, type Frame } from './sse-reader.js';

// A run whose log was archived (moved from its stream to MongoDB once it ended) reads as before:
// the same pages, and a Server-Sent Events stream that replays it and ends. The runs service here
// splits the log over two streams and archives a run a moment after it ends.

const layout = runEventLayout(2);

describe('run events of an archived run', () => {
  let harness: Harness;
  let app: App;
  let alice: Caller;
  let jsm: JetStreamManager;
  let baseUrl: string;

  beforeAll(async () => {
    harness = await startHarness({ peerEnv: { RUN_EVENT_SHARDS: '2', RUN_EVENTS_ARCHIVE_AFTER_MS: '100' } });
    app = harness.app;
    alice = await harness.caller();
    jsm = (await jetStreamOf(harness.nc)).jsm;
    baseUrl = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await harness?.close();
  });

  const stream = async (runId: string, headers: Record<string, string> = {}): Promise<Frame[]> => {
    const res = await fetch(`${baseUrl}/v1/runs/${runId}/events/stream`, { headers: { ...alice.headers, ...headers } });
    expect(res.status).toBe(200);
    const frames = frameReader(res.body!);
    const seen: Frame[] = [];
    for (;;) {
      const [frame] = await frames.until(1);
      if (!frame) throw new Error(`the stream closed without an end after ${seen.length} events`);
      seen.push(frame);
      if (frame.event === 'end') break;
    }
    expect(await frames.next()).toBeNull();
    return seen;
  };

  const pages = async (runId: string, limit: number): Promise<RunEventPage[]> => {
    const all: RunEventPage[] = [];
    let from = 1;
    for (;;) {
      const res = await fetch(`${baseUrl}/v1/runs/${runId}/events?from=${from}&limit=${limit}`, {
        headers: alice.headers,
      });
      expect(res.status).toBe(200);
      const page = RunEventPage.parse(await res.json());
      all.push(page);
      if (page.terminal) return all;
      from = page.next_sequence;
    }
  };

  const inStream = async (runId: string) => {
    const subject = layout.subjectOf(runId);
    const info = await jsm.streams.info(layout.streamOf(runId), { subjects_filter: subject });
    return info.state.subjects?.[subject] ?? 0;
  };

  it('replays an archived run over SSE with the same ids and data, then ends; pages are the same', async () => {
    const { run, driver } = await harness.run(alice.user._id, 'running');
    // Followed live while it runs: the stream ends once the run is done.
    const following = stream(run.id);
    await driver!.append(
      ...Array.from({ length: 6 }, (_, i) => ({ type: 'message.delta', item_id: 'm1', delta: `part ${i}` })),
    );
    await driver!.to('completed');
    const live = await following;
    expect(live.map((f) => f.event)).toEqual([
      'run.status',
      'run.status',
      'run.status',
      ...Array<string>(6).fill('message.delta'),
      'run.status',
      'end',
    ]);

    await waitFor('the run to be archived and purged from its stream', async () => (await inStream(run.id)) === 0);

    expect(await stream(run.id)).toEqual(live);
    const resumeAfter = live[4]!.id!;
    expect(await stream(run.id, { 'last-event-id': resumeAfter })).toEqual(live.slice(5));
    const byThree = await pages(run.id, 3);
    expect(byThree.flatMap((p) => p.events.map((e) => String(e.sequence)))).toEqual(
      live.filter((f) => f.id !== undefined).map((f) => f.id),
    );
    expect(byThree.flatMap((p) => p.events.map((e) => JSON.stringify(e)))).toEqual(
      live.filter((f) => f.id !== undefined).map((f) => f.data),
    );
    expect(byThree.at(-1)).toMatchObject({ terminal: true, status: 'completed' });
  });
});
