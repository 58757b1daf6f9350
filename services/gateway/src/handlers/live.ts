import { JsonValue, Timestamp, subjects, type RunEvent } from '@threadwork/contracts';
import { decodeJson, type NatsConnection } from '@threadwork/platform';
import { z } from 'zod';
import { parseSequenceHeader } from '../domain/events.js';

/** What RUN_EVENTS stores per event, and so what its republish carries as data. */
const StoredEvent = z.object({ chunk: JsonValue, created_at: Timestamp });

/**
 * One message of `run.live.<runId>`. `sequence` and `previous` come from the republish headers;
 * `event` is null when the body is not the stored shape (it can still be read from a page).
 */
export interface LiveMessage {
  sequence: number | undefined;
  previous: number | undefined;
  event: RunEvent | null;
}

export interface LiveSubscription {
  close(): void;
}

/**
 * Follows a run's live subject (core NATS; RUN_EVENTS republishes every stored event there).
 * Subscribing never needs ownership: a message only says "read the log again", and reading it is
 * checked by the runs service.
 */
export function followRun(
  nc: NatsConnection,
  runId: string,
  onMessage: (message: LiveMessage) => void,
): LiveSubscription {
  const subscription = nc.subscribe(subjects.runLive(runId), {
    callback: (err, msg) => {
      if (err) return;
      const sequence = parseSequenceHeader(msg.headers?.get('Nats-Sequence'));
      const previous = parseSequenceHeader(msg.headers?.get('Nats-Last-Sequence'));
      let event: RunEvent | null = null;
      if (sequence !== undefined) {
        try {
          const stored = StoredEvent.safeParse(decodeJson(msg.data));
          if (stored.success) event = { sequence, chunk: stored.data.chunk, created_at: stored.data.created_at };
        } catch {
          event = null;
        }
      }
      onMessage({ sequence, previous, event });
    },
  });
  return { close: () => subscription.unsubscribe() };
}

/**
 * Subscribes at once and remembers whether a live message of the run has arrived; `wait` resolves
 * on the first one (or at once if it came already), after `timeoutMs`, or when `signal` aborts.
 */
export function firstLiveMessage(nc: NatsConnection, runId: string) {
  let wake: () => void = () => {};
  let arrived = false;
  const woken = new Promise<void>((resolve) => {
    wake = resolve;
  });
  const subscription = followRun(nc, runId, () => {
    arrived = true;
    wake();
  });
  return {
    /** True when a live message arrived (before or during the wait). */
    async wait(timeoutMs: number, signal: AbortSignal): Promise<boolean> {
      if (arrived) return true;
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => wake();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        await Promise.race([
          woken,
          new Promise<void>((resolve) => {
            timer = setTimeout(resolve, timeoutMs);
          }),
        ]);
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
      }
      return arrived;
    },
    close: () => subscription.close(),
  };
}
