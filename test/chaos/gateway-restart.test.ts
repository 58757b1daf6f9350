import type { RunEvent } from '@threadwork/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createThread, isTerminalStatus, logProblems, readLog } from './support/api.js';
import { Cluster, type ChaosUser } from './support/cluster.js';
import {
  followByLongPoll,
  followBySse,
  sequenceProblems,
  type FollowResult,
  type SseResult,
} from './support/follow.js';
import { RunDriver } from '@threadwork/testing';

// Fault: the gateway restarts — once gracefully (SIGTERM), once by `kill -9` — while clients
// follow a run's events by long-poll and by SSE and the run keeps writing (the writer talks to
// the runs service over NATS, so it does not notice). Every follower resumes from its
// `next_sequence` / `Last-Event-ID` and ends with every event exactly once, in order, closed by
// the run's terminal event (SSE: `event: end`).

const ROUNDS = Number(process.env.CHAOS_ROUNDS ?? 2);
const TOTAL = 3_000;
const BATCH = 25;
/** Between batches, so the log grows over seconds rather than in one burst. */
const PAUSE_MS = 15;
/** The writer stops at these counts until the fault before it is over, so each fault has writes on both sides. */
const GATES = [1_000, 2_000];
/** …and each fault starts once this many events are past the previous gate. */
const FAULT_AFTER = 400;

let cluster: Cluster;
let user: ChaosUser;
let repoId: number;

beforeAll(async () => {
  cluster = await Cluster.start({ runners: 0 });
  user = cluster.createUser();
  repoId = await cluster.addRepo(user);
});
afterAll(async () => {
  await cluster?.stop();
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The index a `command.output` chunk carries (`line N`); undefined for other events. */
function indexOf(event: RunEvent): number | undefined {
  const chunk = event.chunk as { type?: string; delta?: string };
  return chunk.type === 'command.output' ? Number(chunk.delta!.slice('line '.length)) : undefined;
}

/** Writes `line 0…TOTAL-1` in batches, stopping at each gate until it opens; then completes the run. */
class Writer {
  written = 0;
  private readonly reached = new Map<number, () => void>();
  private readonly gates = new Map<number, Promise<void>>();

  constructor(private readonly driver: RunDriver) {}

  /** Resolves once `count` events have been written. */
  until(count: number): Promise<void> {
    if (this.written >= count) return Promise.resolve();
    return new Promise((resolve) => this.reached.set(count, resolve));
  }

  /** The writer waits at `count` for `open`. */
  gate(count: number, open: Promise<void>): void {
    this.gates.set(count, open);
  }

  async run(): Promise<void> {
    while (this.written < TOTAL) {
      await this.gates.get(this.written);
      const start = this.written;
      const size = Math.min(BATCH, TOTAL - start, ...GATES.filter((g) => g > start).map((g) => g - start));
      await this.driver.append(
        ...Array.from({ length: size }, (_, j) => ({
          type: 'command.output',
          item_id: 'c1',
          delta: `line ${start + j}`,
        })),
      );
      this.written += size;
      for (const [count, resolve] of this.reached) if (this.written >= count) resolve();
      await pause(PAUSE_MS);
    }
    await this.driver.to('completed');
  }
}

/** Everything a follower must have: each index once and in order, increasing sequences, the terminal event last. */
function followerProblems(name: string, result: FollowResult, log: RunEvent[]): string[] {
  const problems = [...result.problems, ...sequenceProblems(result.events)].map((p) => `${name}: ${p}`);
  if (!result.finished) {
    problems.push(`${name}: did not reach the end (last sequence ${result.events.at(-1)?.sequence})`);
  }
  const indices = result.events.map(indexOf).filter((i): i is number => i !== undefined);
  const firstWrong = indices.findIndex((index, i) => index !== i);
  if (firstWrong >= 0 || indices.length !== TOTAL) {
    problems.push(`${name}: ${indices.length} indices, first out of place at position ${firstWrong}`);
  }
  if (!result.events.length || !isTerminalStatus(result.events.at(-1)!)) {
    problems.push(`${name}: the last event is not the terminal status`);
  }
  // Same events as the log itself, byte for byte.
  if (JSON.stringify(result.events) !== JSON.stringify(log)) problems.push(`${name}: differs from the stored log`);
  if (result.hangs) problems.push(`${name}: ${result.hangs} requests hung`);
  // While the gateway is away a request is refused or reset; when it answers, only 200 or 503 `unavailable`.
  for (const refusal of result.refusals) {
    if (!/^503 /.test(refusal) || !refusal.includes('"code":"unavailable"')) {
      problems.push(`${name}: answered ${refusal}`);
    }
  }
  return problems;
}

describe('gateway restart while clients follow a run', () => {
  it(
    'long-poll and SSE followers resume with no gap and no repeat, across SIGTERM and kill -9',
    { timeout: 600_000 },
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const thread = await createThread(cluster, user, { repository_id: repoId, prompt: `follow round ${round}` });
        const runId = thread.run_id;
        const driver = await (await RunDriver.claim(await cluster.connect(), runId)).start();
        const writer = new Writer(driver);

        let phase = 'before';
        const label = () => phase;
        const longPolls = [500, 50, 13].map((limit) => followByLongPoll(cluster, user, runId, { limit, wait: 5 }));
        const streams = [0, 1, 2].map(() => followBySse(cluster, user, runId, { label }));

        // Faults, each while the writer is still writing: a graceful restart, then a crash.
        const faults = (async () => {
          let gateDone: () => void = () => {};
          writer.gate(GATES[0]!, new Promise<void>((resolve) => (gateDone = resolve)));
          await writer.until(FAULT_AFTER);
          phase = 'sigterm';
          await cluster.restartService('gateway');
          phase = 'after sigterm';
          gateDone();

          writer.gate(GATES[1]!, new Promise<void>((resolve) => (gateDone = resolve)));
          await writer.until(GATES[0]! + FAULT_AFTER);
          phase = 'kill -9';
          await cluster.crashAndRestartService('gateway');
          phase = 'after kill -9';
          gateDone();
        })();

        const [, , polled, streamed] = await Promise.all([
          writer.run(),
          faults,
          Promise.all(longPolls),
          Promise.all(streams),
        ]);

        const log = await readLog(cluster, user, runId);
        expect(logProblems(log), cluster.logs()).toEqual([]);
        expect(log.map(indexOf).filter((i) => i !== undefined)).toHaveLength(TOTAL);

        const problems = [
          ...polled.flatMap((r, i) => followerProblems(`long-poll ${i}`, r, log)),
          // The faults reached each long-poll: it lost its connection or was refused at least once.
          ...polled.flatMap((r, i) =>
            r.connectionErrors.length + r.refusals.length ? [] : [`long-poll ${i}: never saw the gateway go away`],
          ),
          ...streamed.flatMap((r, i) => followerProblems(`sse ${i}`, r, log)),
          ...streamed.flatMap((r, i) => sseEndingProblems(`sse ${i}`, r)),
        ];
        expect(problems, summary(polled, streamed)).toEqual([]);
      }
    },
  );
});

/**
 * A stream cut by a graceful stop says so first (`event: error`, `unavailable`); one cut by a
 * crash simply breaks. Streams end only through the faults and, finally, with `end`.
 */
function sseEndingProblems(name: string, result: SseResult): string[] {
  const problems: string[] = [];
  const labels = result.endings.map((e) => e.label);
  if (!labels.includes('sigterm') || !labels.includes('kill -9')) {
    problems.push(`${name}: its stream was not cut by both faults (${labels.join(', ')})`);
  }
  for (const { ending, label } of result.endings) {
    if (ending.kind === 'end') continue;
    if (label === 'sigterm' && !(ending.kind === 'error-frame' && ending.code === 'unavailable')) {
      problems.push(`${name}: a graceful stop ended a stream with ${JSON.stringify(ending)}`);
    }
    if (label !== 'sigterm' && label !== 'kill -9') {
      problems.push(`${name}: a stream ended ${JSON.stringify(ending)} outside a fault (${label})`);
    }
  }
  return problems;
}

function summary(polled: FollowResult[], streamed: SseResult[]): string {
  const one = (name: string, r: FollowResult) =>
    `${name}: ${r.events.length} events, statuses ${JSON.stringify(countOf(r.statuses))}, ` +
    `${r.connectionErrors.length} connection errors, refusals ${JSON.stringify(r.refusals.slice(0, 3))}`;
  return [
    ...polled.map((r, i) => one(`long-poll ${i}`, r)),
    ...streamed.map((r, i) => `${one(`sse ${i}`, r)}, endings ${JSON.stringify(r.endings)}`),
  ].join('\n');
}

function countOf(values: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const v of values) counts[v] = (counts[v] ?? 0) + 1;
  return counts;
}
