// The run event log through the gateway: long-polled pages and the Server-Sent Events stream,
// woken by messages on `run.live.<runId>` — from the runs service's RUN_EVENTS stream's republish,
// with runs moved and events appended as a runner does (RunDriver), and live messages published by
// hand where a test needs one the stream would not send (a repeat, a late one).
import { STREAM_NAMES, subjects, type RunEvent } from '@threadwork/contracts';
import { encodeJson, jetStreamOf, natsHeaders, type JetStreamManager } from '@threadwork/platform';
import type { RunDriver } from '@threadwork/testing';
import { afterAll, beforeAll } from 'vitest';
import { startHarness, type App, type Caller, type DrivableStatus, type Harness } from './harness.js';

/** Shorter than the longest wait (30 s): a long-poll that sat out its wait times the test out. */
export const WAIT_GUARD_MS = 25_000;

/** An event of no run's log, for a live message by hand. */
export const liveEvent = (sequence: number, chunk: Record<string, unknown>): RunEvent => ({
  sequence,
  chunk,
  created_at: new Date().toISOString(),
});

export let harness: Harness;
export let app: App;
export let alice: Caller;
let jsm: JetStreamManager;
export let baseUrl: string;

/** Starts the gateway's harness, listening on a port, with alice as its caller; call inside the file's describe. */
export function useEventsHarness(): void {
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
}

/** The event the runs service stored at `sequence`, as a page shows it. */
export async function storedEvent(sequence: number): Promise<RunEvent> {
  const message = await jsm.streams.getMessage(STREAM_NAMES.runEvents, { seq: sequence });
  if (!message) throw new Error(`RUN_EVENTS holds nothing at ${sequence}`);
  const { chunk, created_at } = message.json<{ chunk: Record<string, unknown>; created_at: string }>();
  return { sequence, chunk, created_at };
}

/** The sequence of the last event of the run's log. */
export async function lastSequence(runId: string): Promise<number> {
  const last = await jsm.streams.getMessage(STREAM_NAMES.runEvents, { last_by_subj: subjects.runEvents(runId) });
  if (!last) throw new Error(`the log of ${runId} is empty`);
  return last.seq;
}

export interface TestRun {
  id: string;
  /** The runner's stand-in holding the run (none for a run cancelled before a runner took it). */
  driver: RunDriver | null;
  /** The sequence after the last event of the run's log so far (its status moves are in it). */
  from: number;
}

/** Alice's new run, moved to `status`; `from` is where a read of only what comes next starts. */
export async function newRun(status: DrivableStatus = 'running'): Promise<TestRun> {
  const { run, driver } = await harness.run(alice.user._id, status);
  return { id: run.id, driver, from: (await lastSequence(run.id)) + 1 };
}

/** Appends an event as the runner does; the runs service stores it, then it goes out live. */
export async function appendStored(run: TestRun, chunk: Record<string, unknown>): Promise<RunEvent> {
  const [sequence] = await run.driver!.append(chunk);
  return storedEvent(sequence!);
}

/** Ends the run as its runner does; returns the `run.status` event that closes its log. */
export async function finish(run: TestRun, status: 'completed' | 'failed'): Promise<RunEvent> {
  const error = status === 'failed' ? { error: { code: 'harness_error', message: 'the harness failed' } } : {};
  await run.driver!.to(status, error);
  return storedEvent(await lastSequence(run.id));
}

/**
 * Appends events whose live messages are lost on the way: RUN_EVENTS republishes none while they
 * are stored (its republish pointed at no run), so a follower learns of them only from the next
 * live message's Nats-Last-Sequence, as when a live message is dropped.
 */
export async function appendUnseen(run: TestRun, ...chunks: Record<string, unknown>[]): Promise<RunEvent[]> {
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
export function publishLive(runId: string, stored: RunEvent, previous: number): void {
  const headers = natsHeaders();
  headers.set('Nats-Sequence', String(stored.sequence));
  headers.set('Nats-Last-Sequence', String(previous));
  harness.nc.publish(subjects.runLive(runId), encodeJson({ chunk: stored.chunk, created_at: stored.created_at }), {
    headers,
  });
}
