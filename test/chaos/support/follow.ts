import { RunEvent, RunEventPage } from '@threadwork/contracts';
import { SseDecoder } from '@threadwork/testing';
import type { ChaosUser, Cluster } from './cluster.js';

// Clients that follow a run's log the way a real one would through faults: by long-poll pages
// and by Server-Sent Events, retrying (with a short backoff) on connection errors and 503, and
// resuming from `next_sequence` / `Last-Event-ID`. They record everything they saw, so a test can
// check that nothing was lost or repeated and that every answer was one the contract allows.

/** How one SSE connection ended. */
export type SseEnding =
  | { kind: 'end' }
  | { kind: 'error-frame'; code: string; message: string }
  | { kind: 'closed' }
  | { kind: 'reset'; message: string };

export interface FollowResult {
  events: RunEvent[];
  /** Status of every answered request, in order. */
  statuses: number[];
  /** `<status> <body>` of every answer other than 200. */
  refusals: string[];
  /** Requests that failed without an answer (refused, reset) or were cut mid-body. */
  connectionErrors: string[];
  /** Requests that got no answer at all within `hangMs`. */
  hangs: number;
  /** Contract breaches seen on the way (a wrong `next_sequence`, an SSE id that is not the sequence). */
  problems: string[];
  /** True once the log was followed to its end (a `terminal` page, an SSE `end`). */
  finished: boolean;
}

export interface SseResult extends FollowResult {
  /** How each connection ended, with what `label()` said at that moment. */
  endings: { ending: SseEnding; label: string }[];
}

export interface FollowOptions {
  /** Give up (and report what was seen) after this long. */
  deadlineMs?: number;
  /** A request with no answer in this long counts as a hang (and is retried). */
  hangMs?: number;
  /** What the test is doing right now (e.g. which fault), recorded with each SSE ending. */
  label?: () => string;
  /** Called with the number of events received so far, whenever it grows. */
  onProgress?: (events: number) => void;
  /** The gateway replica to ask (`gateway-2`, …); the first one when not given. */
  via?: string;
}

const BACKOFF_MS = 150;
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function emptyResult(): FollowResult {
  return { events: [], statuses: [], refusals: [], connectionErrors: [], hangs: 0, problems: [], finished: false };
}

const isTimeout = (err: unknown) => err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
const describe = (err: unknown) =>
  err instanceof Error ? `${err.message}${err.cause instanceof Error ? ` (${err.cause.message})` : ''}` : String(err);

/** Follows `GET /v1/runs/{id}/events?from=&limit=&wait=` from sequence 1 until a terminal page. */
export async function followByLongPoll(
  cluster: Cluster,
  user: ChaosUser,
  runId: string,
  {
    limit,
    wait = 5,
    deadlineMs = 180_000,
    hangMs = 30_000,
    onProgress = () => {},
    via,
  }: FollowOptions & { limit: number; wait?: number },
): Promise<FollowResult> {
  const result = emptyResult();
  const deadline = Date.now() + deadlineMs;
  let from = 1;
  while (Date.now() < deadline) {
    let status: number;
    let text: string;
    try {
      const res = await cluster.fetch(`/v1/runs/${runId}/events?from=${from}&limit=${limit}&wait=${wait}`, {
        user,
        signal: AbortSignal.timeout(hangMs),
        ...(via === undefined ? {} : { via }),
      });
      status = res.status;
      text = await res.text();
    } catch (err) {
      if (isTimeout(err)) result.hangs++;
      else result.connectionErrors.push(describe(err));
      await pause(BACKOFF_MS);
      continue;
    }
    result.statuses.push(status);
    if (status !== 200) {
      result.refusals.push(`${status} ${text}`);
      await pause(BACKOFF_MS);
      continue;
    }
    const page = RunEventPage.parse(JSON.parse(text));
    const expected = page.events.length ? page.events.at(-1)!.sequence + 1 : from;
    if (page.next_sequence !== expected) {
      result.problems.push(`page from ${from}: next_sequence ${page.next_sequence}, expected ${expected}`);
    }
    result.events.push(...page.events);
    if (page.events.length) onProgress(result.events.length);
    from = page.next_sequence;
    if (page.terminal) {
      result.finished = true;
      return result;
    }
  }
  return result;
}

/**
 * Follows `GET /v1/runs/{id}/events/stream` until `event: end`, reconnecting whenever a connection
 * ends without it, with `Last-Event-ID` set to the last id received (none before the first).
 */
export async function followBySse(
  cluster: Cluster,
  user: ChaosUser,
  runId: string,
  { deadlineMs = 180_000, hangMs = 30_000, label = () => '', onProgress = () => {}, via }: FollowOptions = {},
): Promise<SseResult> {
  const result: SseResult = { ...emptyResult(), endings: [] };
  const deadline = AbortSignal.timeout(deadlineMs);
  let lastId: number | undefined;
  const ended = (ending: SseEnding) => result.endings.push({ ending, label: label() });

  while (!deadline.aborted) {
    // The headers must come within hangMs; the stream itself may then last until the deadline.
    const connection = new AbortController();
    const onDeadline = () => connection.abort();
    deadline.addEventListener('abort', onDeadline, { once: true });
    let hung = false;
    const hangTimer = setTimeout(() => {
      hung = true;
      connection.abort();
    }, hangMs);
    let res: Response;
    try {
      res = await cluster.fetch(`/v1/runs/${runId}/events/stream`, {
        user,
        headers: lastId === undefined ? {} : { 'last-event-id': String(lastId) },
        signal: connection.signal,
        ...(via === undefined ? {} : { via }),
      });
    } catch (err) {
      deadline.removeEventListener('abort', onDeadline);
      if (hung) result.hangs++;
      else if (!deadline.aborted) result.connectionErrors.push(describe(err));
      await pause(BACKOFF_MS);
      continue;
    } finally {
      clearTimeout(hangTimer);
    }
    result.statuses.push(res.status);
    if (res.status !== 200) {
      deadline.removeEventListener('abort', onDeadline);
      result.refusals.push(`${res.status} ${await res.text().catch((err: unknown) => describe(err))}`);
      await pause(BACKOFF_MS);
      continue;
    }

    const reader = res.body!.getReader();
    const frames = new SseDecoder();
    let ending: SseEnding | undefined;
    try {
      while (ending === undefined) {
        const { value, done } = await reader.read();
        if (done) {
          ending = { kind: 'closed' };
          break;
        }
        for (const frame of frames.push(value)) {
          if (ending !== undefined) {
            result.problems.push(`a frame after the stream's ${ending.kind}: ${JSON.stringify(frame)}`);
            continue;
          }
          if (frame.event === 'end') {
            ending = { kind: 'end' };
          } else if (frame.event === 'error') {
            const body = JSON.parse(frame.data || '{}') as { error?: { code?: string; message?: string } };
            ending = { kind: 'error-frame', code: body.error?.code ?? '?', message: body.error?.message ?? '' };
          } else if (frame.id !== undefined) {
            const event = RunEvent.parse(JSON.parse(frame.data || 'null'));
            if (String(event.sequence) !== frame.id) {
              result.problems.push(`SSE id ${frame.id} carries the event of sequence ${event.sequence}`);
            }
            result.events.push(event);
            lastId = event.sequence;
            onProgress(result.events.length);
          }
        }
      }
    } catch (err) {
      ending = { kind: 'reset', message: describe(err) };
    } finally {
      deadline.removeEventListener('abort', onDeadline);
      connection.abort();
    }
    if (deadline.aborted) break;
    ended(ending);
    if (ending.kind === 'end') {
      result.finished = true;
      return result;
    }
    await pause(BACKOFF_MS);
  }
  return result;
}

/** Sequences that do not increase strictly (so a repeat, or events out of order). */
export function sequenceProblems(events: readonly RunEvent[]): string[] {
  const problems: string[] = [];
  for (let i = 1; i < events.length; i++) {
    if (events[i]!.sequence <= events[i - 1]!.sequence) {
      problems.push(`sequence ${events[i]!.sequence} follows ${events[i - 1]!.sequence}`);
    }
  }
  return problems;
}
