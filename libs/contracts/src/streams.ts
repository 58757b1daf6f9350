import { RUN_EVENT_SHARDS_METADATA, runEventLayout } from './run-event-shards.js';
import { subjects } from './subjects.js';

// JetStream streams as plain data; the platform library maps them onto JetStream's config
// (durations here are milliseconds, JetStream wants nanoseconds).

export type StreamRetention = 'limits' | 'workqueue';

export interface StreamDefinition {
  readonly name: string;
  readonly description: string;
  readonly subjects: readonly string[];
  readonly retention: StreamRetention;
  readonly storage: 'file';
  /** 0 or absent: kept until other limits apply. */
  readonly max_age_ms?: number;
  /** Lets any replica answer direct gets, the cheap way to read one message by sequence. */
  readonly allow_direct?: boolean;
  /**
   * Accepts atomic batches (JetStream 2.12): a batch's messages are stored together, at
   * consecutive sequences, or none is.
   */
  readonly allow_atomic?: boolean;
  /** Republish every stored message to core NATS (with its stream sequence in headers). */
  readonly republish?: { readonly src: string; readonly dest: string };
  /** Stream metadata (JetStream `metadata`): facts a later start checks the stream against. */
  readonly metadata?: Readonly<Record<string, string>>;
}

export const STREAM_NAMES = {
  runEvents: 'RUN_EVENTS',
  runJobs: 'RUN_JOBS',
  domain: 'DOMAIN',
} as const;

/**
 * RUN_EVENTS — limits retention: the durable, ordered log of every run, read many times (pages,
 * SSE, resumes) by sequence, so messages must survive being read; the configurable max age is
 * the event retention. Direct gets keep a page read O(page). Split into `shards` streams by run
 * id (run-event-shards.ts): one stream, RUN_EVENTS, by default; each records the shard count it
 * was made for in its metadata, so a start with another count is refused rather than orphaning
 * the logs.
 */
export function runEventsStream({
  maxAgeMs,
  shards = 1,
  shard = 0,
}: {
  maxAgeMs: number;
  shards?: number;
  shard?: number;
}): StreamDefinition {
  if (!Number.isInteger(maxAgeMs) || maxAgeMs < 0) {
    throw new RangeError(`RUN_EVENTS max age must be a non-negative integer of milliseconds, got ${maxAgeMs}`);
  }
  const layout = runEventLayout(shards);
  const name = layout.streams[shard];
  if (name === undefined) throw new RangeError(`shard ${shard} is not one of 0..${shards - 1}`);
  const src = layout.shardSubject(shard);
  return {
    name,
    description:
      shards === 1
        ? 'Ordered event log of every run, paged by sequence'
        : `Ordered event logs of the runs of shard ${shard} of ${shards}, paged by sequence`,
    subjects: [src],
    retention: 'limits',
    storage: 'file',
    max_age_ms: maxAgeMs,
    allow_direct: true,
    // A run's batch of events goes in whole behind the event it was checked against.
    allow_atomic: true,
    // Followers subscribe to `run.live.<runId>` whatever the shard: the run id is the last token.
    republish: { src, dest: shards === 1 ? subjects.runLiveAll : `run.live.{{wildcard(1)}}` },
    metadata: { [RUN_EVENT_SHARDS_METADATA]: String(shards) },
  };
}

/** Every stream of the run event log. */
export function runEventsStreams({ maxAgeMs, shards = 1 }: { maxAgeMs: number; shards?: number }): StreamDefinition[] {
  return Array.from({ length: shards }, (_, shard) => runEventsStream({ maxAgeMs, shards, shard }));
}

/**
 * RUN_JOBS — work-queue retention: each admitted run is taken by exactly one runner and removed
 * once acked; ack-wait with in-progress acks is the heartbeat and redelivery the crash recovery.
 */
export const RUN_JOBS_STREAM: StreamDefinition = {
  name: STREAM_NAMES.runJobs,
  description: 'Admitted runs waiting for a runner, one subject per harness',
  subjects: [subjects.runJobsAll],
  retention: 'workqueue',
  storage: 'file',
};

/** Durable consumers ack long before this; a week only bounds the disk a forgotten consumer can cost. */
export const DOMAIN_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * DOMAIN — limits retention: several services each react to the same state change through their
 * own durable consumer, so a message must outlive any one consumer's ack.
 */
export const DOMAIN_STREAM: StreamDefinition = {
  name: STREAM_NAMES.domain,
  description: 'State changes other services react to',
  subjects: [subjects.domainAll],
  retention: 'limits',
  storage: 'file',
  max_age_ms: DOMAIN_MAX_AGE_MS,
};

/** Every stream the platform should ensure at start-up. */
export function allStreams({
  runEventsMaxAgeMs,
  runEventShards = 1,
}: {
  runEventsMaxAgeMs: number;
  runEventShards?: number;
}): readonly StreamDefinition[] {
  return [...runEventsStreams({ maxAgeMs: runEventsMaxAgeMs, shards: runEventShards }), RUN_JOBS_STREAM, DOMAIN_STREAM];
}
