// Benchmark 4: the runner's way of appending events (its own EventSink: batches of up to 100,
// one `runs.append` request at a time, each stored by the runs service after it checked the run)
// against the floor under it: the same batches published raw to RUN_EVENTS, each batch's publishes
// sent at once and their acks awaited together, one batch at a time as the runner sends them.
import { randomUUID } from 'node:crypto';
import { STREAM_NAMES, subjects } from '@threadwork/contracts';
import { createLogger, encodeJson } from '@threadwork/platform';
// The runner's own class, through its package: the benchmark follows its batching if that changes,
// and moving the class breaks the build rather than this file at run time.
import { EventSink } from '@threadwork/runner';
import { createHeldRun, outputChunk } from '../lib/runs.mjs';
import { nowMs } from '../lib/sse.mjs';

const logger = createLogger({ service: 'bench-sink', level: 'error' });

/** How many events the stream holds on a subject. */
async function storedOn(stack, subject) {
  const info = await stack.jsm.streams.info(STREAM_NAMES.runEvents, { subjects_filter: subject });
  return info.state.subjects?.[subject] ?? 0;
}

/** Appends `count` events to a held run as the runner does; returns the milliseconds it took. */
export async function appendLikeRunner(stack, held, count) {
  let refused = null;
  const sink = new EventSink(stack.nc, held.runId, held.attempt, held.claimId, logger, (reason) => {
    refused = reason;
  });
  const started = nowMs();
  for (let n = 0; n < count; n++) sink.push(outputChunk(n));
  await sink.flush();
  const ms = nowMs() - started;
  if (refused) throw new Error(`append refused: ${refused}`);
  // The sink drops a batch it cannot store (and logs it): check that none was.
  const stored = await storedOn(stack, subjects.runEvents(held.runId));
  if (stored < count) throw new Error(`only ${stored} of ${count} events were stored`);
  return ms;
}

/** The runner's batch size (BATCH_MAX in services/runner/src/clients/run-events.ts). */
const BATCH = 100;

/**
 * Publishes `count` events of the stored shape to a subject of RUN_EVENTS in batches of the
 * runner's size: within a batch every publish is sent without waiting and the acks are awaited
 * together (pipelined async publish); the next batch goes once they are all in.
 */
async function publishPipelined(stack, count) {
  const runId = `run_raw_${randomUUID().replace(/-/g, '')}`;
  const subject = subjects.runEvents(runId);
  const started = nowMs();
  for (let first = 0; first < count; first += BATCH) {
    const acks = [];
    for (let n = first; n < Math.min(count, first + BATCH); n++) {
      const stored = { chunk: outputChunk(n), created_at: new Date().toISOString() };
      acks.push(stack.js.publish(subject, encodeJson(stored), { msgID: `${runId}:${n}` }));
    }
    await Promise.all(acks);
  }
  const ms = nowMs() - started;
  const stored = await storedOn(stack, subject);
  if (stored !== count) throw new Error(`only ${stored} of ${count} raw events were stored`);
  return ms;
}

/** `events` in all through each path, in `rounds` alternating rounds (see lib/load.mjs for why). */
export async function appendBenchmark(stack, { events, rounds }) {
  // A short warm-up of both paths (JIT, the stream's first blocks), not counted.
  await appendLikeRunner(stack, await createHeldRun(stack, 'append warm-up'), 1_000);
  await publishPipelined(stack, 1_000);

  const perRound = Math.ceil(events / rounds);
  let oursMs = 0;
  let baselineMs = 0;
  for (let i = 0; i < rounds; i++) {
    oursMs += await appendLikeRunner(stack, await createHeldRun(stack, `append benchmark ${i}`), perRound);
    baselineMs += await publishPipelined(stack, perRound);
  }
  const total = perRound * rounds;
  return {
    events: total,
    ours: { perSecond: (total * 1000) / oursMs, ms: oursMs },
    baseline: { perSecond: (total * 1000) / baselineMs, ms: baselineMs },
  };
}
