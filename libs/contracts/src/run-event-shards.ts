import { z } from 'zod';
import { subjectToken, subjects } from './subjects.js';

// Where a run's event log lives: the one mapping from a run id to its stream and subject. Every
// writer and reader of run events (the runs service, admin tools, tests, the bench) goes through
// it, so none can look for a run's log anywhere else.
//
// The log is split into N streams (RUN_EVENT_SHARDS), fixed when a deployment is installed: a run
// stays in the stream its id hashes to for good, so changing N would orphan every run's log. With
// N = 1 the log is the single stream RUN_EVENTS with subjects `run.events.<runId>` (as before
// shards existed); with N > 1 shard k is the stream RUN_EVENTS_<k> with subjects
// `run.events.<k>.<runId>`. Either way each stored event is republished to `run.live.<runId>`.

/** The most shards a deployment may have: the NATS grants name each shard's stream. */
export const MAX_RUN_EVENT_SHARDS = 32;

/** Stream metadata key recording the shard count a run event stream was created for. */
export const RUN_EVENT_SHARDS_METADATA = 'threadwork_run_event_shards';

/** RUN_EVENT_SHARDS: how many streams hold the run event log (1..MAX_RUN_EVENT_SHARDS). */
export const runEventShardCount = z.coerce
  .number()
  .int()
  .min(1)
  .max(MAX_RUN_EVENT_SHARDS, `at most ${MAX_RUN_EVENT_SHARDS}`);

function checkShards(shards: number): void {
  if (!Number.isInteger(shards) || shards < 1 || shards > MAX_RUN_EVENT_SHARDS) {
    throw new RangeError(`run event shards must be an integer in 1..${MAX_RUN_EVENT_SHARDS}, got ${shards}`);
  }
}

/**
 * The shard of a run: FNV-1a (32 bits) of the run id's UTF-8 bytes, modulo the shard count.
 * Stable across processes, versions and platforms — it must never change.
 */
export function runEventShard(runId: string, shards: number): number {
  checkShards(shards);
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(runId)) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % shards;
}

/** The name of shard `shard`'s stream: RUN_EVENTS when there is one shard, else RUN_EVENTS_<shard>. */
export function runEventStreamName(shard: number, shards: number): string {
  checkShards(shards);
  if (!Number.isInteger(shard) || shard < 0 || shard >= shards) {
    throw new RangeError(`shard ${shard} is not one of 0..${shards - 1}`);
  }
  return shards === 1 ? 'RUN_EVENTS' : `RUN_EVENTS_${shard}`;
}

/** Every stream name any shard count may use: the NATS grants cover them all. */
export function everyRunEventStreamName(): string[] {
  return ['RUN_EVENTS', ...Array.from({ length: MAX_RUN_EVENT_SHARDS }, (_, k) => `RUN_EVENTS_${k}`)];
}

export interface RunEventLayout {
  readonly shards: number;
  /** The stream names, shard 0 first. */
  readonly streams: readonly string[];
  shardOf(runId: string): number;
  /** The stream holding the run's log. */
  streamOf(runId: string): string;
  /** The subject of the run's log in that stream. */
  subjectOf(runId: string): string;
  /** The subjects of shard `shard`'s stream (all of RUN_EVENTS' with one shard). */
  shardSubject(shard: number): string;
}

export function runEventLayout(shards: number): RunEventLayout {
  checkShards(shards);
  const streams = Array.from({ length: shards }, (_, k) => runEventStreamName(k, shards));
  const shardOf = (runId: string) => runEventShard(runId, shards);
  return {
    shards,
    streams,
    shardOf,
    streamOf: (runId) => streams[shardOf(subjectToken(runId, 'runId'))]!,
    subjectOf: (runId) =>
      shards === 1
        ? subjects.runEvents(runId)
        : subjects.runEventsOfShard(shardOf(subjectToken(runId, 'runId')), runId),
    shardSubject: (shard) => (shards === 1 ? subjects.runEventsAll : subjects.runEventsShardAll(shard)),
  };
}
