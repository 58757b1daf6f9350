import { z } from 'zod';
import { Id, JsonValue, Timestamp, queryInt, optionalQueryParam } from '../common.js';
import { CollaborationMode, RunStatus } from '../values.js';

/**
 * Why a run failed. `code` is deliberately open (e.g. `runner_lost`, harness errors): these are
 * run outcomes, not the closed set of HTTP error codes.
 */
export const RunError = z.object({
  code: z.string(),
  message: z.string(),
  detail: z.string().optional(),
});
export type RunError = z.infer<typeof RunError>;

/** camelCase because the contract names them so; every field is optional since harnesses report different subsets. */
export const RunUsage = z.object({
  inputTokens: z.number().nonnegative().optional(),
  outputTokens: z.number().nonnegative().optional(),
  totalTokens: z.number().nonnegative().optional(),
  /** What the run cost in US dollars, as the harness prices it (Claude Code does; Codex does not). */
  costUsd: z.number().nonnegative().optional(),
});
export type RunUsage = z.infer<typeof RunUsage>;

export const Run = z.object({
  id: Id,
  thread_id: Id,
  project_id: Id,
  message_id: Id,
  status: RunStatus,
  attempt: z.int().min(0),
  harness: Id,
  model: Id,
  reasoning_effort: Id,
  collaboration_mode: CollaborationMode,
  sandbox_id: Id.nullable(),
  error: RunError.nullable(),
  usage: RunUsage.nullable(),
  created_at: Timestamp,
  updated_at: Timestamp,
  started_at: Timestamp.nullable(),
  completed_at: Timestamp.nullable(),
  terminal: z.boolean(),
});
export type Run = z.infer<typeof Run>;

/** What every response that admits or accepts a run carries so the caller can follow it. */
export const RunRef = z.object({
  run_id: Id,
  run_status: RunStatus,
  message_id: Id,
  run_url: z.string().min(1),
  events_url: z.string().min(1),
});
export type RunRef = z.infer<typeof RunRef>;

/** Sequences start at 1, as JetStream stream sequences do. */
export const Sequence = z.int().min(1);
export type Sequence = z.infer<typeof Sequence>;

/**
 * `chunk` stays an open JSON value here, as in the contract: a reader must not fail on a chunk
 * type a newer runner writes. `RunEventChunk` (events.ts) is the typed view for producers.
 */
export const RunEvent = z.object({
  sequence: Sequence,
  chunk: JsonValue,
  created_at: Timestamp,
});
export type RunEvent = z.infer<typeof RunEvent>;

/**
 * `terminal` is true only when the run is terminal and this page reaches the end of its log;
 * `next_sequence` is the last returned sequence + 1, or `from` when the page is empty.
 */
export const RunEventPage = z.object({
  events: z.array(RunEvent),
  next_sequence: Sequence,
  status: RunStatus,
  terminal: z.boolean(),
  error: RunError.nullable(),
});
export type RunEventPage = z.infer<typeof RunEventPage>;

export const RUN_EVENTS_LIMIT_DEFAULT = 100;
export const RUN_EVENTS_LIMIT_MAX = 1000;
export const RUN_EVENTS_WAIT_MAX_SECONDS = 30;

/**
 * `from` of an event read: a sequence, or 0 for "before the first one". Sequences start at 1, so 0
 * and 1 read the same (the gateway reads from 1, so `next_sequence` of an empty page is always a
 * real sequence). No transform here: the schema must render as JSON Schema both ways.
 */
const EventsFrom = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** The first sequence an event read with `from` starts at. */
export const firstSequenceFrom = (from: number): number => Math.max(from, 1);

/** GET /v1/runs/{id}/events */
export const RunEventsQuery = z.object({
  from: optionalQueryParam(EventsFrom.default(1)),
  limit: queryInt({ min: 1, max: RUN_EVENTS_LIMIT_MAX, defaultValue: RUN_EVENTS_LIMIT_DEFAULT }),
  // Seconds to long-poll when nothing is there yet; bounded so a request cannot pin a connection.
  wait: optionalQueryParam(z.coerce.number().min(0).max(RUN_EVENTS_WAIT_MAX_SECONDS).default(0)),
});
export type RunEventsQuery = z.infer<typeof RunEventsQuery>;

/** GET /v1/runs/{id}/events/stream — without `from`, the gateway falls back to `Last-Event-ID`, then 1. */
export const RunEventsStreamQuery = z.object({
  from: optionalQueryParam(EventsFrom.optional()),
});
export type RunEventsStreamQuery = z.infer<typeof RunEventsStreamQuery>;
