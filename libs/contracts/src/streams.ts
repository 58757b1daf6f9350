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
  /** Republish every stored message to core NATS (with its stream sequence in headers). */
  readonly republish?: { readonly src: string; readonly dest: string };
}

export const STREAM_NAMES = {
  runEvents: 'RUN_EVENTS',
  runJobs: 'RUN_JOBS',
  domain: 'DOMAIN',
} as const;

/**
 * RUN_EVENTS — limits retention: the durable, ordered log of every run, read many times (pages,
 * SSE, resumes) by sequence, so messages must survive being read; the configurable max age is
 * the event retention. Direct gets keep a page read O(page).
 */
export function runEventsStream({ maxAgeMs }: { maxAgeMs: number }): StreamDefinition {
  if (!Number.isInteger(maxAgeMs) || maxAgeMs < 0) {
    throw new RangeError(`RUN_EVENTS max age must be a non-negative integer of milliseconds, got ${maxAgeMs}`);
  }
  return {
    name: STREAM_NAMES.runEvents,
    description: 'Ordered event log of every run, paged by sequence',
    subjects: [subjects.runEventsAll],
    retention: 'limits',
    storage: 'file',
    max_age_ms: maxAgeMs,
    allow_direct: true,
    republish: { src: subjects.runEventsAll, dest: subjects.runLiveAll },
  };
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
export function allStreams({ runEventsMaxAgeMs }: { runEventsMaxAgeMs: number }): readonly StreamDefinition[] {
  return [runEventsStream({ maxAgeMs: runEventsMaxAgeMs }), RUN_JOBS_STREAM, DOMAIN_STREAM];
}
