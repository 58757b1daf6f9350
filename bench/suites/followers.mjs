// Benchmark 5: many Server-Sent Events followers of one run. Events are appended the way the
// runner sends them (a `runs.append` batch at most every 50 ms, one at a time), each stamped with
// the time its batch was sent; every follower notes when each event reached it. Ours: the
// gateway's /v1/runs/{id}/events/stream, the followers spread evenly over its replicas. Baseline:
// a bare fastify route forwarding the run's live subject.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { rpc } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { cpuMeter } from '../lib/proc.mjs';
import { percentile } from '../lib/report.mjs';
import { createHeldRun, outputChunk } from '../lib/runs.mjs';
import { followRaw, nowMs } from '../lib/sse.mjs';

/** The runner's flush interval (services/runner/src/clients/run-events.ts). */
const BATCH_EVERY_MS = 50;
/** Followers connecting at once: each connection costs the gateway an authentication and a page read. */
const CONNECT_WAVE = 50;
/** Where outputChunk(n, { sent_at }) puts its stamp in the frame's JSON. */
const SENT_AT = Buffer.from('"sent_at":');
/** The end of an SSE frame. */
const FRAME_END = Buffer.from('\n\n');
/** A double quote, with which a stamp begins. */
const QUOTE = 0x22;
/** Whether a byte may be part of the stamp's number (digits, `.`, `e`, `+`, `-`). */
const isNumberByte = (b) => (b >= 0x30 && b <= 0x39) || b === 0x2e || b === 0x65 || b === 0x2b || b === 0x2d;
/** The uncounted first round of each side. */
const WARMUP_SECONDS = 2;
/** How long deliveries may trail the last append before the missing ones count as lost. */
const DRAIN_MS = 10_000;

/** Descriptors beyond the followers' sockets this process needs (NATS, the HTTP client, files). */
const FILE_MARGIN = 200;

/** This process's soft limit of open files (`ulimit -n`). */
function fileLimit() {
  const limits = readFileSync('/proc/self/limits', 'utf8');
  return Number(/^Max open files\s+(\d+)/m.exec(limits)?.[1] ?? Infinity);
}

/** Fails early when this process may not hold a socket per follower (`ulimit -n`). */
export function assertEnoughFiles(followers) {
  const soft = fileLimit();
  if (soft < followers + FILE_MARGIN) {
    throw new Error(`${followers} followers need more open files than this shell allows (ulimit -n is ${soft})`);
  }
}

/**
 * Opens `count` followers of `url` into `followers` (so a failure half-way still leaves every open
 * one there to close); each delivery of a stamped event adds its latency to `latencies`.
 */
async function openFollowers(urls, headers, count, latencies, followers) {
  for (let i = 0; i < count; i += CONNECT_WAVE) {
    const wave = Array.from({ length: Math.min(CONNECT_WAVE, count - i) }, (_, j) =>
      followRaw(urls[(i + j) % urls.length], headers, stampReader(latencies)),
    );
    followers.push(...wave);
    await Promise.all(wave.map((f) => f.opened));
  }
}

/**
 * What one follower does with the bytes it reads: each stamped event adds its latency to
 * `latencies` when its frame is complete, taken from the time the read that completed it arrived.
 * The stamp is found in the bytes (no decoding of the stream, the event or its JSON): this process
 * shares the cores with the servers, and what it spends per delivery is taken from them. What
 * follows a read's last complete frame is kept for the next read when it may hold part of a stamp
 * (a stamp begins with a quote; bytes without one are transfer framing or a frame's `id:` line).
 */
function stampReader(latencies) {
  let rest = null;
  return (bytes, receivedAt) => {
    const buf = rest ? Buffer.concat([rest, bytes]) : bytes;
    const lastEnd = buf.lastIndexOf(FRAME_END);
    const complete = lastEnd < 0 ? 0 : lastEnd + FRAME_END.length;
    rest = complete < buf.length && buf.includes(QUOTE, complete) ? buf.subarray(complete) : null;
    for (let at = buf.indexOf(SENT_AT); at >= 0 && at < complete; at = buf.indexOf(SENT_AT, at + 1)) {
      let last = at + SENT_AT.length;
      while (isNumberByte(buf[last])) last += 1;
      latencies.push(receivedAt - Number(buf.toString('latin1', at + SENT_AT.length, last)));
    }
  };
}

/**
 * Appends to one side's run for `seconds`, a batch every 50 ms (or one event at a time, less
 * often, below 20 events/s), each awaited before the next as the runner does, then waits until
 * every follower has every event (or DRAIN_MS passed). Returns how many events it appended and
 * the seconds from its first append to the last delivery.
 */
async function appendRound(stack, side, { eventsPerSecond, seconds }) {
  const every = Math.max(BATCH_EVERY_MS, 1000 / eventsPerSecond);
  const perBatch = Math.max(1, Math.round((eventsPerSecond * every) / 1000));
  const batches = Math.max(1, Math.round((seconds * 1000) / every));
  const expected = side.latencies.length + perBatch * batches * side.followers.length;
  const started = nowMs();
  for (let b = 0; b < batches; b++) {
    const due = started + b * every;
    if (due > nowMs()) await sleep(due - nowMs());
    const events = Array.from({ length: perBatch }, () => {
      side.appended += 1;
      return { key: `${side.held.attempt}:${side.appended}`, chunk: outputChunk(side.appended, { sent_at: nowMs() }) };
    });
    await request(stack.nc, rpc.runs.append, {
      run_id: side.held.runId,
      attempt: side.held.attempt,
      claim_id: side.held.claimId,
      events,
    });
  }
  const deadline = nowMs() + DRAIN_MS;
  while (side.latencies.length < expected && nowMs() < deadline) await sleep(20);
  return { events: perBatch * batches, seconds: (nowMs() - started) / 1000 };
}

/** One side's measured rounds. */
async function measuredRound(stack, side, { pids, ...round }) {
  const cpu = cpuMeter(pids);
  const { events, seconds } = await appendRound(stack, side, round);
  side.events += events;
  side.appendSeconds += round.seconds;
  side.elapsedSeconds += seconds;
  for (const [name, spent] of cpu()) side.cpuSeconds.set(name, (side.cpuSeconds.get(name) ?? 0) + (spent ?? 0));
}

function summarize(side) {
  const sorted = Float64Array.from(side.latencies).sort();
  return {
    followers: side.followers.length,
    connectSeconds: side.connectSeconds,
    events: side.events,
    offeredPerSecond: side.events / side.appendSeconds,
    delivered: side.latencies.length,
    lost: side.events * side.followers.length - side.latencies.length,
    deliveredPerSecond: side.latencies.length / side.elapsedSeconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: percentile(sorted, 100),
    cpuMsPerThousandDeliveries: new Map(
      [...side.cpuSeconds].map(([name, seconds]) => [name, (seconds * 1e6) / Math.max(1, side.latencies.length)]),
    ),
  };
}

/** Closes `followers` and waits until each has ended. */
async function closeAll(followers) {
  for (const f of followers) f.close();
  await Promise.all(followers.map((f) => f.ended));
}

/**
 * Both sides' followers stay connected throughout; appends alternate between our run and the
 * baseline's in `rounds` rounds (see lib/load.mjs for why), so one side's followers idle while
 * the other's are fed. A first round of each side warms it up and is not counted: the first
 * events a server fans out to many new streams run through code that is not optimised yet. When
 * this process may not hold both sides' sockets at once (`ulimit -n`), the sides run one after
 * the other instead, each with its followers connected only for its own rounds.
 * Ours is spread over `gatewayBases` (every replica of the gateway).
 */
export async function followersBenchmark(stack, { followers, eventsPerSecond, seconds, rounds, gatewayBases }) {
  const together = fileLimit() >= 2 * followers + FILE_MARGIN;
  assertEnoughFiles(together ? 2 * followers : followers);
  const bases = gatewayBases ?? [stack.base];
  const specs = [
    [(runId) => bases.map((base) => `${base}/v1/runs/${runId}/events/stream`), stack.headers],
    [(runId) => [`${stack.baselineBase}/runs/${runId}/stream`], {}],
  ];
  const sides = [];
  const open = async ([urls, headers]) => {
    const held = await createHeldRun(stack, 'followers benchmark');
    const side = {
      held,
      followers: [],
      latencies: [],
      appended: 0,
      events: 0,
      appendSeconds: 0,
      elapsedSeconds: 0,
      cpuSeconds: new Map(),
    };
    sides.push(side);
    const connecting = nowMs();
    await openFollowers(urls(held.runId), headers, followers, side.latencies, side.followers);
    side.connectSeconds = (nowMs() - connecting) / 1000;
    await appendRound(stack, side, { eventsPerSecond, seconds: WARMUP_SECONDS });
    side.latencies.length = 0;
    return side;
  };
  const pids = () => new Map([...stack.processIds(), ['load generator', process.pid]]);
  try {
    if (together) {
      for (const spec of specs) await open(spec);
      for (let i = 0; i < rounds; i++) {
        for (const side of sides) {
          await measuredRound(stack, side, { eventsPerSecond, seconds: seconds / rounds, pids: pids() });
        }
      }
    } else {
      for (const spec of specs) {
        const side = await open(spec);
        for (let i = 0; i < rounds; i++) {
          await measuredRound(stack, side, { eventsPerSecond, seconds: seconds / rounds, pids: pids() });
        }
        await closeAll(side.followers);
      }
    }
    const [ours, baseline] = sides.map(summarize);
    return { ours, baseline, together, gateways: bases.length };
  } finally {
    await closeAll(sides.flatMap((side) => side.followers));
  }
}
