import { subjects, type RunEventPage } from '@threadwork/contracts';
import { isPlainPublish, type NatsConnection } from '@threadwork/platform';

// A run's live subject (`run.live.<runId>`, core NATS, where RUN_EVENTS republishes every stored
// event) is only ever a wake-up: "the log has more". What followers are sent is read from the log
// through the runs service, which checks the owner, so a message put on the live subject some other
// way (by a stolen key, a misconfigured account) shows no one anything.

export interface LiveSubscription {
  close(): void;
}

type Subscription = ReturnType<NatsConnection['subscribe']>;

/** One run's live subscription on one connection, shared by everyone following that run there. */
interface LiveTopic {
  subscription: Subscription;
  listeners: Set<() => void>;
}

const topicsByConnection = new WeakMap<NatsConnection, Map<string, LiveTopic>>();

interface Logger {
  warn(context: object, message: string): void;
}

/**
 * Wakes everyone listening on the connection each time it reconnects: live messages sent while it
 * was away (its server died, a stream leader republished meanwhile) are lost, and a follower that
 * missed the last one would wait for good. A wake-up too many costs one read.
 */
function wakeOnReconnect(nc: NatsConnection, topics: Map<string, LiveTopic>): void {
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type !== 'reconnect') continue;
      for (const topic of [...topics.values()]) for (const listener of [...topic.listeners]) listener();
    }
  })();
}

/**
 * Hears a run's live subject. All listeners of a run on a connection share one subscription, so a
 * message crosses the wire once however many follow the run; the last one to leave unsubscribes.
 * Subscribing never needs ownership: a wake-up carries nothing to show. `onWake` must not throw.
 */
export function followRun(nc: NatsConnection, runId: string, onWake: () => void, logger?: Logger): LiveSubscription {
  let topics = topicsByConnection.get(nc);
  if (!topics) {
    topics = new Map();
    topicsByConnection.set(nc, topics);
    wakeOnReconnect(nc, topics);
  }
  let topic = topics.get(runId);
  if (!topic) {
    const listeners = new Set<() => void>();
    const subscription = nc.subscribe(subjects.runLive(runId), {
      callback: (err, msg) => {
        if (err) return;
        // RUN_EVENTS republishes without a reply subject. One with a reply was put here some other
        // way (a JetStream delivery or a service's answer aimed at this subject): not a wake-up.
        if (!isPlainPublish(msg)) {
          logger?.warn({ run_id: runId, reply: msg.reply }, 'refused a live message that RUN_EVENTS did not republish');
          return;
        }
        for (const listener of listeners) listener();
      },
    });
    topic = { subscription, listeners };
    topics.set(runId, topic);
  }
  // A listener of its own, so the same callback given twice is two listeners.
  const listener = () => onWake();
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

/** A page of a run's log read from `from`, as the runs service answered it. */
export interface LogRead {
  from: number;
  page: RunEventPage;
}

/** One follower of a run's log: where it stands, and what to do with what was read for it. */
export interface LogFollower {
  /** The last sequence it has (from pages it read or was handed): it has every event up to it. */
  lastSent(): number;
  /** A page read for every follower; `from` past `lastSent() + 1` means a gap it must read itself. Must not throw. */
  onRead(read: LogRead): void;
  /** The read failed (the runs service did not answer, the run is gone). Must not throw. */
  onError(err: unknown): void;
}

/**
 * Reads a run's log for everyone on this connection who follows it as one owner. A wake-up makes
 * it read pages from past the furthest point any of them has until a page comes back empty or the
 * run is done, and hand each page to all of them (sequences are the stream's, so a follower that
 * is further back cannot tell a gap from other runs' events: it reads from its own point itself). Wake-
 * ups during a read make one more read after it, so a burst of events costs a few reads, not one
 * per event, per follower.
 */
class RunLogReader {
  readonly followers = new Set<LogFollower>();
  /** The last sequence this reader has read (0: nothing yet). */
  private frontier = 0;
  private reading = false;
  private again = false;

  constructor(private readonly readPage: (from: number) => Promise<RunEventPage>) {}

  wake(): void {
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = true;
    void this.read().finally(() => {
      this.reading = false;
    });
  }

  private async read(): Promise<void> {
    do {
      this.again = false;
      let from = this.frontier + 1;
      for (const follower of this.followers) from = Math.max(from, follower.lastSent() + 1);
      while (this.followers.size > 0) {
        let page: RunEventPage;
        try {
          page = await this.readPage(from);
        } catch (err) {
          for (const follower of [...this.followers]) follower.onError(err);
          return;
        }
        for (const follower of [...this.followers]) follower.onRead({ from, page });
        const last = page.events.at(-1)?.sequence;
        if (last === undefined || page.terminal) break;
        this.frontier = Math.max(this.frontier, last);
        from = last + 1;
      }
    } while (this.again && this.followers.size > 0);
  }
}

const readersByConnection = new WeakMap<
  NatsConnection,
  Map<string, { reader: RunLogReader; live: LiveSubscription }>
>();

/**
 * Follows a run's log as `ownerId`: `readPage` reads a page of it for that owner (the runs service
 * checks the owner on every read). Followers of the same run and owner on a connection share one
 * reader; the last to leave stops it.
 */
export function followRunLog(
  nc: NatsConnection,
  runId: string,
  ownerId: string,
  readPage: (from: number) => Promise<RunEventPage>,
  follower: LogFollower,
  logger?: Logger,
): LiveSubscription {
  let readers = readersByConnection.get(nc);
  if (!readers) {
    readers = new Map();
    readersByConnection.set(nc, readers);
  }
  // Owner ids are opaque; a NUL cannot be in one, so the key is unambiguous.
  const key = `${runId}\u0000${ownerId}`;
  let entry = readers.get(key);
  if (!entry) {
    const reader = new RunLogReader(readPage);
    entry = { reader, live: followRun(nc, runId, () => reader.wake(), logger) };
    readers.set(key, entry);
  }
  const joined = entry;
  const runReaders = readers;
  // A wrapper of its own, so the same follower given twice is two followers.
  const own: LogFollower = {
    lastSent: () => follower.lastSent(),
    onRead: (read) => follower.onRead(read),
    onError: (err) => follower.onError(err),
  };
  joined.reader.followers.add(own);
  return {
    close() {
      if (!joined.reader.followers.delete(own) || joined.reader.followers.size > 0) return;
      joined.live.close();
      if (runReaders.get(key) === joined) runReaders.delete(key);
    },
  };
}
