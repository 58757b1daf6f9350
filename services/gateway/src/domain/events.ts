import {
  RunStatus,
  firstSequenceFrom,
  isTerminalRunStatus,
  type RunEvent,
  type RunEventPage,
} from '@threadwork/contracts';

// Pure pieces of following a run's event log: where a stream starts, how one event is framed for
// Server-Sent Events, and when the stream is over.

/** Event name used when a chunk has no usable `type` (an SSE event name cannot hold a newline). */
export const FALLBACK_EVENT_NAME = 'event';
const EVENT_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

/** `?from=` wins, then the sequence after `Last-Event-ID` (what a reconnecting EventSource sends), then 1. */
export function streamStart(from: number | undefined, lastEventId: number | undefined): number {
  if (from !== undefined) return firstSequenceFrom(from);
  if (lastEventId !== undefined) return lastEventId + 1;
  return 1;
}

export function eventName(chunk: unknown): string {
  if (typeof chunk === 'object' && chunk !== null && 'type' in chunk) {
    const type = (chunk as { type: unknown }).type;
    if (typeof type === 'string' && EVENT_NAME_PATTERN.test(type)) return type;
  }
  return FALLBACK_EVENT_NAME;
}

/** Frames made so far, by event: a live event is one object shared by every follower of its run. */
const frames = new WeakMap<RunEvent, string>();

/**
 * One run event as an SSE frame: `id` is the sequence (so `Last-Event-ID` resumes after it),
 * `event` the chunk type, `data` the event exactly as a page element (`{sequence, chunk,
 * created_at}`) on one line: JSON.stringify escapes newlines inside strings. Made once per event
 * object, however many streams it is written to (events are never changed once read).
 */
export function sseEventFrame(event: RunEvent): string {
  let frame = frames.get(event);
  if (frame === undefined) {
    frame = `id: ${event.sequence}\nevent: ${eventName(event.chunk)}\ndata: ${JSON.stringify(event)}\n\n`;
    frames.set(event, frame);
  }
  return frame;
}

/** The run is terminal and every event has been sent. */
export const SSE_END_FRAME = 'event: end\ndata: {}\n\n';
/** A comment line: keeps proxies from timing out an idle stream; EventSource ignores it. */
export const SSE_PING_FRAME = ': ping\n\n';

/** Sent instead of `end` when the stream cannot go on (say, the runs service stopped answering). */
export function sseErrorFrame(code: string, message: string): string {
  return `event: error\ndata: ${JSON.stringify({ error: { code, message } })}\n\n`;
}

/** A `run.status` chunk that moves the run to a terminal state: nothing but stragglers follows it. */
export function isTerminalStatusChunk(chunk: unknown): boolean {
  if (typeof chunk !== 'object' || chunk === null) return false;
  const { type, status } = chunk as { type?: unknown; status?: unknown };
  if (type !== 'run.status') return false;
  const parsed = RunStatus.safeParse(status);
  return parsed.success && isTerminalRunStatus(parsed.data);
}

/**
 * Has the stream shown everything? The page says so (`terminal`: run terminal and log drained),
 * or, after a terminal `run.status` was seen, a page from past it came back empty.
 */
export function streamFinished(page: RunEventPage, sawTerminalChunk: boolean): boolean {
  if (page.terminal) return true;
  return page.events.length === 0 && (sawTerminalChunk || isTerminalRunStatus(page.status));
}
