import { createParser } from 'eventsource-parser';
import type { RunEvent } from './log.js';

// Follows a run's log over Server-Sent Events (GET /v1/runs/{id}/events/stream).
//
// Why fetch + eventsource-parser rather than EventSource: the stream names each event after its
// chunk type, so EventSource would deliver only the types we registered a listener for (a newer
// runner's chunk would vanish); the gateway's own "stream cannot go on" frame is also named
// `error`, which EventSource mixes up with its connection errors; and EventSource never shows the
// response's status, so a 401 (signed out), 404 (not yours) or 429 (too many streams) would look
// like a network blip it retries forever. With fetch we see the status, read every event and
// resume ourselves from the last sequence seen (`?from=`), which also makes the resume point
// explicit instead of hidden in the browser's Last-Event-ID. The parser is ~1 kB.

export type StreamState = 'connecting' | 'live' | 'reconnecting' | 'ended';

export interface FollowOptions {
  /** The last sequence already shown: the stream starts after it. */
  after: number;
  /** New events in order, each at most once (repeats of a resumed stream are dropped here). */
  onEvents(events: RunEvent[]): void;
  onState(state: StreamState): void;
  /** The gateway refused the stream for good: 401 (signed out) or 404 (no such run of the caller's). */
  onRefused(status: 401 | 404): void;
}

const RETRY_MS_DEFAULT = 3_000;
const RETRY_MS_MAX = 30_000;

/** Starts following; the returned function stops (and closes the connection). */
export function followRun(runId: string, options: FollowOptions): () => void {
  const abort = new AbortController();
  void follow(runId, options, abort.signal);
  return () => abort.abort();
}

async function follow(runId: string, options: FollowOptions, signal: AbortSignal): Promise<void> {
  let last = options.after;
  let retryMs = RETRY_MS_DEFAULT;
  let failures = 0;
  options.onState('connecting');
  while (!signal.aborted) {
    let ended = false;
    try {
      const res = await fetch(`/v1/runs/${encodeURIComponent(runId)}/events/stream?from=${last + 1}`, {
        // Same-origin only, like every request of the console (api/client.ts).
        credentials: 'same-origin',
        mode: 'same-origin',
        headers: { accept: 'text/event-stream' },
        cache: 'no-store',
        signal,
      });
      if (res.status === 401 || res.status === 404) {
        await res.body?.cancel();
        options.onRefused(res.status);
        return;
      }
      if (!res.ok || !res.body) {
        // 429 too_many_streams, 503 unavailable and the like: wait as asked, then try again.
        const after = Number(res.headers.get('retry-after'));
        if (after > 0) retryMs = Math.min(after * 1000, RETRY_MS_MAX);
        await res.body?.cancel();
        throw new Error(`HTTP ${res.status}`);
      }
      options.onState('live');
      failures = 0;
      let batch: RunEvent[] = [];
      const parser = createParser({
        onEvent(message) {
          if (message.event === 'end') {
            ended = true;
            return;
          }
          const event = parseEvent(message.data);
          // Anything else without a sequence is the gateway's "cannot go on" frame (`event: error`
          // with `{error}`): the connection closes next and we resume from `last`.
          if (event && event.sequence > last) {
            last = event.sequence;
            batch.push(event);
          }
        },
        onRetry(ms) {
          retryMs = Math.min(ms, RETRY_MS_MAX);
        },
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(value);
        // One batch per network read: a long stored log arrives in a few renders, not one per event.
        if (batch.length > 0) {
          options.onEvents(batch);
          batch = [];
        }
        if (ended) {
          await reader.cancel();
          break;
        }
      }
    } catch {
      if (signal.aborted) return;
    }
    if (ended) {
      options.onState('ended');
      return;
    }
    // Dropped before `end`: reconnect from the last sequence seen, backing off while it keeps failing.
    options.onState('reconnecting');
    await sleep(Math.min(retryMs * 2 ** Math.min(failures, 4), RETRY_MS_MAX), signal);
    failures += 1;
  }
}

function parseEvent(data: string): RunEvent | null {
  try {
    const value = JSON.parse(data) as Partial<RunEvent> | null;
    return typeof value?.sequence === 'number' && 'chunk' in value
      ? { sequence: value.sequence, chunk: value.chunk, created_at: String(value.created_at ?? '') }
      : null;
  } catch {
    return null;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}
