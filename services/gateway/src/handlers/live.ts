import { JsonValue, Timestamp, subjects, type RunEvent } from '@threadwork/contracts';
import { decodeJson, isPlainPublish, type NatsConnection } from '@threadwork/platform';
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

type Subscription = ReturnType<NatsConnection['subscribe']>;
type Msg = Parameters<NonNullable<NonNullable<Parameters<NatsConnection['subscribe']>[1]>['callback']>>[1];

/** One run's live subscription on one connection, shared by everyone following that run there. */
interface LiveTopic {
  subscription: Subscription;
  listeners: Set<(message: LiveMessage) => void>;
}

const topicsByConnection = new WeakMap<NatsConnection, Map<string, LiveTopic>>();

/** A republished event as followers see it; parsed once however many follow the run. */
function liveMessage(msg: Msg): LiveMessage {
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
  return { sequence, previous, event };
}

/**
 * Follows a run's live subject (core NATS; RUN_EVENTS republishes every stored event there).
 * Subscribing never needs ownership: a message only says "read the log again", and reading it is
 * checked by the runs service.
 *
 * All followers of a run on a connection share one subscription, so an event crosses the wire and
 * is parsed once, not once per follower (a thousand people watching one run would otherwise cost
 * a thousand copies of every event). A follower that joins an existing subscription hears every
 * message from then on, as a fresh subscription would; the last one to leave unsubscribes.
 * `onMessage` must not throw: the message is shared, and a listener that threw would keep it from
 * the listeners after it.
 */
export function followRun(
  nc: NatsConnection,
  runId: string,
  onMessage: (message: LiveMessage) => void,
  logger?: { warn(context: object, message: string): void },
): LiveSubscription {
  let topics = topicsByConnection.get(nc);
  if (!topics) {
    topics = new Map();
    topicsByConnection.set(nc, topics);
  }
  let topic = topics.get(runId);
  if (!topic) {
    const listeners = new Set<(message: LiveMessage) => void>();
    const subscription = nc.subscribe(subjects.runLive(runId), {
      callback: (err, msg) => {
        if (err) return;
        // RUN_EVENTS republishes without a reply subject. One with a reply was put here some other
        // way (a JetStream delivery or a service's answer aimed at this subject): not an event.
        if (!isPlainPublish(msg)) {
          logger?.warn({ run_id: runId, reply: msg.reply }, 'refused a live message that RUN_EVENTS did not republish');
          return;
        }
        const message = liveMessage(msg);
        for (const listener of listeners) listener(message);
      },
    });
    topic = { subscription, listeners };
    topics.set(runId, topic);
  }
  // A listener of its own, so the same callback given twice is two followers.
  const listener = (message: LiveMessage) => onMessage(message);
  const joined = topic;
  const runTopics = topics;
  joined.listeners.add(listener);
  return {
    close() {
      if (!joined.listeners.delete(listener) || joined.listeners.size > 0) return;
      joined.subscription.unsubscribe();
      if (runTopics.get(runId) === joined) runTopics.delete(runId);
    },
  };
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
      if (arrived || signal.aborted) return arrived;
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
