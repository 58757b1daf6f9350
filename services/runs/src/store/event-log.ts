import { JetStreamApiCodes, JetStreamApiError, JetStreamError } from '@nats-io/jetstream';
import type { RunEventLayout } from '@threadwork/contracts';
import type { PubAck, StoredMsg } from '@nats-io/jetstream';
import {
  AppError,
  encodeJson,
  isAppError,
  isTransientPublishError,
  PUBLISH_BACKOFF,
  publishAtomicBatch,
  publishJson,
  publishRetryWindowOf,
  retry,
  SpanKind,
  unavailable,
  withSpan,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
} from '@threadwork/platform';
import type { LoggedEvent } from '../domain/event-page.js';
import { runMetrics } from '../metrics.js';

// The log of run R is one subject of one stream, as the layout says (`run.events.R` of RUN_EVENTS
// with one shard; see run-event-shards.ts in contracts); one message per event, stored as
// `{chunk, created_at}`. An event's sequence is its stream sequence (see domain/event-page.ts).

export interface LogEntry {
  /** Unique within the run: the message is published with Nats-Msg-Id `${run_id}:${key}`, so a retry is stored once. */
  key: string;
  chunk: unknown;
  /** On a runner's events only: the attempt whose holder wrote it (see `end`). */
  runnerAttempt?: number;
}

export interface EventLog {
  /** Appends in order and returns each entry's sequence (the original one for a deduplicated retry). */
  append(runId: string, entries: readonly LogEntry[], at?: Date): Promise<number[]>;
  /** The sequence of the run's last event; 0 while its log is empty. */
  lastSequence(runId: string): Promise<number>;
  /**
   * The run's last event: its sequence, and the attempt whose runner wrote it (null for an event
   * the runs service wrote, the run's status moves and its terminal event among them). Null while
   * the log is empty.
   */
  end(runId: string): Promise<LogEnd | null>;
  /**
   * Appends one entry only if the run's last event is still the one at `last` (see lastSequence),
   * and returns its sequence; null when another event came first. A writer that decided on the log
   * as it stood thereby never lands behind an event it did not see. A deduplicated retry returns
   * the original sequence, wherever the log stands.
   */
  appendAfter(runId: string, last: number, entry: LogEntry, at?: Date): Promise<number | null>;
  /**
   * Appends the entries as one atomic batch (at consecutive sequences, all or none) only if the
   * run's last event is still the one at `last`, and returns their sequences. null when nothing of
   * the batch was stored: another event came first, one of the entries was stored before (the
   * batch is then refused whole; appendAfter finds each one's original sequence), or the stream
   * did not answer. At most MAX_ATOMIC_BATCH entries.
   */
  appendBatchAfter(runId: string, last: number, entries: readonly LogEntry[], at?: Date): Promise<number[] | null>;
  /**
   * Events of the run with sequence ≥ from, at most `limit` (fewer when they would not fit one
   * reply), in O(limit) whatever the log's length.
   */
  read(runId: string, from: number, limit: number): Promise<LoggedEvent[]>;
  /**
   * Removes the run's events with sequence < `before` from its stream (once they are archived);
   * later ones stay. Purging again removes nothing more.
   */
  purge(runId: string, before: number): Promise<void>;
  /** The JSON bytes a page may pass before it stops (then one event more at most). */
  pageBytes(): number;
}

/** The most entries appendBatchAfter takes (JetStream 2.12 refuses atomic batches past 1,000). */
export const MAX_ATOMIC_BATCH = 500;

export interface LogEnd {
  sequence: number;
  runnerAttempt: number | null;
}

interface StoredEvent {
  chunk: unknown;
  created_at: string;
  /** LogEntry.runnerAttempt: not part of the event as read (pages leave it out). */
  runner_attempt?: number;
}

function loggedEvent(m: StoredMsg): LoggedEvent {
  const stored = m.json<Partial<StoredEvent>>();
  return {
    sequence: m.seq,
    pending: m.pending,
    chunk: stored.chunk ?? null,
    created_at: typeof stored.created_at === 'string' ? stored.created_at : m.time.toISOString(),
  };
}

// A page of events travels back to the caller as one NATS reply, which must fit the server's
// max_payload. Direct gets stop a batch once it has passed `max_bytes`, so a page holds at most
// that plus one event: events are kept to a quarter of max_payload and pages to a half, which
// leaves room for the reply's own JSON around them.
const EVENT_SHARE = 4;
const PAGE_SHARE = 2;
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/**
 * How long a read waits for the replica that answered to catch up with the leader before failing
 * `unavailable`: well inside the gateway's request timeout (5 s), so the client hears the 503.
 */
const CATCH_UP_MS = 2_000;

export function createEventLog({
  nc,
  js,
  jsm,
  replicated = false,
  layout,
}: {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /**
   * RUN_EVENTS is kept by more than one server. Direct gets are then answered by any replica,
   * one a few messages behind its leader too: the log's end is asked of the leader instead, and a
   * page that stops short of it is read again.
   */
  replicated?: boolean;
  layout: RunEventLayout;
}): EventLog {
  const storedEntry = ({ key, chunk, runnerAttempt }: LogEntry, at: Date) => {
    const stored: StoredEvent = {
      chunk,
      created_at: at.toISOString(),
      ...(runnerAttempt === undefined ? {} : { runner_attempt: runnerAttempt }),
    };
    const size = encodeJson(stored).length;
    const maxEvent = Math.floor(maxPayload(nc) / EVENT_SHARE);
    if (size > maxEvent) {
      throw new AppError('payload_too_large', `event ${key} is ${size} bytes; at most ${maxEvent} fit`);
    }
    return { key, stored };
  };

  /**
   * Stores a batch in the order given. The first entry goes alone (retried through a stream
   * leader's election); the rest are published without waiting for each ack, tried once: one
   * connection's publishes reach the stream in the order they were sent, so the common case costs
   * two round trips whatever the batch's size.
   *
   * When one of the pipelined publishes fails, the ones after it may or may not have been stored
   * (a timeout does not say), and sending the failed one again could store it after a later one.
   * So from the first failure on, entries go one at a time, each only once the one before it is
   * acked, and each carries the expectation that the subject's last event is the one before it
   * (Nats-Expected-Last-Subject-Sequence). An entry already stored is acked as a duplicate (the
   * dedupe is checked first) with its original sequence; one that is not can only land directly
   * after its predecessor. When the expectation fails, the events after the predecessor are read:
   * another writer's events there are fine (the chain goes on after them), but one of this batch's
   * later entries there means the earlier one can no longer be stored in order — that is refused
   * (internal) rather than written out of order.
   */
  async function appendInOrder(
    runId: string,
    stream: string,
    subject: string,
    payloads: readonly { key: string; stored: StoredEvent }[],
  ): Promise<PubAck[]> {
    const msgIdOf = (key: string) => `${runId}:${key}`;
    const [first, ...rest] = payloads;
    if (!first) return [];
    const acks: PubAck[] = [await publishJson(js, subject, first.stored, { msgId: msgIdOf(first.key), span: false })];
    const pipelined = await Promise.allSettled(
      rest.map(({ key, stored }) =>
        publishJson(js, subject, stored, { msgId: msgIdOf(key), span: false, retryForMs: 0 }),
      ),
    );
    let k = 1;
    for (const result of pipelined) {
      if (result.status === 'rejected') break;
      acks.push(result.value);
      k++;
    }
    if (k === payloads.length) return acks;

    const failure = pipelined[k - 1];
    if (failure?.status === 'rejected' && !isTransientPublishError(failure.reason)) throw failure.reason;
    const later = new Set(payloads.slice(k + 1).map(({ key }) => msgIdOf(key)));
    // One retry window for the rest of the batch, not one per entry: an outage that outlasts it
    // fails the append once, whatever the batch's size.
    const deadline = Date.now() + publishRetryWindowOf(js);
    for (; k < payloads.length; k++) {
      const { key, stored } = payloads[k]!;
      const msgId = msgIdOf(key);
      later.delete(msgId);
      let last = acks[k - 1]!.seq;
      const ack = await retry(
        async () => {
          try {
            return await publishJson(js, subject, stored, {
              msgId,
              expectedLastSubjectSequence: last,
              span: false,
              retryForMs: 0,
            });
          } catch (err) {
            if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence))
              throw err;
            // Read failures (the stream still electing) are retried like the publish; a later
            // entry of the batch found stored (internal) is not.
            last = await lastBeforeLaterEntry(stream, subject, last, later).catch((readErr: unknown) => {
              throw isAppError(readErr) ? readErr : unavailable('run event log unavailable', readErr);
            });
            throw unavailable(`event ${key}: the log moved on; chaining after ${last}`);
          }
        },
        {
          ...PUBLISH_BACKOFF,
          untilMs: Math.max(0, deadline - Date.now()),
          shouldRetry: (err) => isTransientPublishError(err) || (isAppError(err) && err.code === 'unavailable'),
        },
      );
      if (ack.seq <= acks[k - 1]!.seq) {
        throw new AppError('internal', `event ${key} of run ${runId} was stored before the one it follows`, {
          retryable: false,
        });
      }
      acks.push(ack);
    }
    return acks;
  }

  /**
   * The sequence of the subject's last event after `after`, read when a chained publish found the
   * log moved on; fails (internal) if one of `later` (this batch's entries still to come) is among
   * them, since the entry being stored would then land after it.
   */
  async function lastBeforeLaterEntry(
    stream: string,
    subject: string,
    after: number,
    later: ReadonlySet<string>,
  ): Promise<number> {
    let last = after;
    for (;;) {
      let seen = 0;
      const batch = await jsm.direct.getBatch(stream, {
        seq: last + 1,
        next_by_subj: subject,
        batch: 256,
      });
      try {
        for await (const m of batch) {
          seen++;
          const id = m.header?.get('Nats-Msg-Id');
          if (id && later.has(id)) {
            throw new AppError('internal', `event ${id} was stored ahead of an earlier event of its batch`, {
              retryable: false,
            });
          }
          last = m.seq;
        }
      } catch (err) {
        if (!isNotFoundStatus(err)) throw err;
      }
      if (seen < 256) return last;
    }
  }

  const eventLog: EventLog = {
    async append(runId, entries, at = new Date()) {
      const subject = layout.subjectOf(runId);
      const stream = layout.streamOf(runId);
      const payloads = entries.map((entry) => storedEntry(entry, at));
      try {
        const acks = await withSpan(
          'append run events',
          {
            kind: SpanKind.PRODUCER,
            attributes: { 'messaging.destination.name': subject, 'messaging.batch.message_count': payloads.length },
          },
          () => appendInOrder(runId, stream, subject, payloads),
        );
        runMetrics().eventsAppended.add(acks.filter((ack) => !ack.duplicate).length);
        return acks.map((ack) => ack.seq);
      } catch (err) {
        if (isAppError(err)) throw err;
        throw unavailable('run event log unavailable', err);
      }
    },

    async lastSequence(runId) {
      try {
        return (await lastOf(runId))?.seq ?? 0;
      } catch (err) {
        throw unavailable('run event log unavailable', err);
      }
    },

    async end(runId) {
      let last;
      try {
        last = await lastOf(runId);
      } catch (err) {
        throw unavailable('run event log unavailable', err);
      }
      if (!last) return null;
      const { runner_attempt: runnerAttempt } = last.json<Partial<StoredEvent>>();
      return { sequence: last.seq, runnerAttempt: typeof runnerAttempt === 'number' ? runnerAttempt : null };
    },

    async appendAfter(runId, last, entry, at = new Date()) {
      const { key, stored } = storedEntry(entry, at);
      try {
        const ack = await publishJson(js, layout.subjectOf(runId), stored, {
          msgId: `${runId}:${key}`,
          expectedLastSubjectSequence: last,
        });
        if (!ack.duplicate) runMetrics().eventsAppended.add(1);
        return ack.seq;
      } catch (err) {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence) return null;
        throw unavailable('run event log unavailable', err);
      }
    },

    async appendBatchAfter(runId, last, entries, at = new Date()) {
      if (entries.length === 0) return [];
      if (entries.length > MAX_ATOMIC_BATCH) throw new RangeError(`at most ${MAX_ATOMIC_BATCH} entries a batch`);
      // One entry is not a batch: appendAfter's answer is the same (null, or its sequence).
      if (entries.length === 1) {
        const sequence = await eventLog.appendAfter(runId, last, entries[0]!, at);
        return sequence === null ? null : [sequence];
      }
      const subject = layout.subjectOf(runId);
      const payloads = entries.map((entry) => storedEntry(entry, at));
      const msgIds = payloads.map(({ key }) => `${runId}:${key}`);
      const messages = payloads.map(({ stored }, i) => ({ data: encodeJson(stored), msgId: msgIds[i]! }));
      try {
        const ack = await withSpan(
          'append run events',
          {
            kind: SpanKind.PRODUCER,
            attributes: { 'messaging.destination.name': subject, 'messaging.batch.message_count': payloads.length },
          },
          () => publishAtomicBatch(nc, subject, messages, { expectLastSubjectSequence: last }),
        );
        runMetrics().eventsAppended.add(payloads.length);
        // Stored together: the batch's events hold the sequences up to its last one.
        return payloads.map((_, i) => ack.seq - (payloads.length - 1) + i);
      } catch (err) {
        if (isAppError(err)) throw err;
        // Refused (the log moved on, an entry stored before) or unanswered: stored whole or not at
        // all. Look, so that a batch stored after all is not stored again one by one.
        const found = await storedAfter(runId, last, new Set(msgIds)).catch((readErr: unknown) => {
          throw unavailable('run event log unavailable', readErr);
        });
        if (found.size === 0) return null;
        if (found.size === msgIds.length) return msgIds.map((id) => found.get(id)!);
        throw new AppError('internal', `only part of an atomic batch of run ${runId} is in its log`, {
          retryable: false,
        });
      }
    },

    async read(runId, from, limit) {
      if (!replicated) return readBatch(runId, from, limit);
      // A page that reaches the end of what its replica holds is checked against the leader's
      // end: a reader woken by an event (the leader republishes what it stores) must find it.
      try {
        return await retry(
          async () => {
            const events = await readBatch(runId, from, limit);
            const last = events.at(-1);
            const full = last !== undefined && (last.pending > 0 || (last.pending < 0 && events.length === limit));
            if (full) return events;
            const end = (await lastOf(runId))?.seq ?? 0;
            if (end < from || (last !== undefined && last.sequence >= end)) return events;
            throw unavailable(
              `a replica of the log of run ${runId} is behind its leader (at ${last?.sequence ?? from - 1} of ${end})`,
            );
          },
          {
            minDelayMs: 20,
            maxDelayMs: 250,
            untilMs: CATCH_UP_MS,
            shouldRetry: (err) => isAppError(err) && err.code === 'unavailable',
          },
        );
      } catch (err) {
        if (isAppError(err)) throw err;
        throw unavailable('run event log unavailable', err);
      }
    },

    pageBytes: () => Math.floor(maxPayload(nc) / PAGE_SHARE),

    async purge(runId, before) {
      try {
        await jsm.streams.purge(layout.streamOf(runId), { filter: layout.subjectOf(runId), seq: before });
      } catch (err) {
        throw unavailable('run event log unavailable', err);
      }
    },
  };
  return eventLog;

  /** The sequences of those of `msgIds` stored in the run's log after `after`. */
  async function storedAfter(runId: string, after: number, msgIds: ReadonlySet<string>): Promise<Map<string, number>> {
    const found = new Map<string, number>();
    for (let from = after + 1; ;) {
      let seen = 0;
      try {
        const batch = await jsm.direct.getBatch(layout.streamOf(runId), {
          seq: from,
          next_by_subj: layout.subjectOf(runId),
          batch: 256,
        });
        for await (const m of batch) {
          seen++;
          const id = m.header?.get('Nats-Msg-Id');
          if (id && msgIds.has(id)) found.set(id, m.seq);
          from = m.seq + 1;
        }
      } catch (err) {
        if (!isNotFoundStatus(err)) throw err;
      }
      if (seen < 256) return found;
    }
  }

  /** The run's last message (null: none), as its stream's leader has it when replicated. */
  async function lastOf(runId: string): Promise<StoredMsg | null> {
    const query = { last_by_subj: layout.subjectOf(runId) };
    return replicated
      ? await jsm.streams.getMessage(layout.streamOf(runId), query)
      : await jsm.direct.getMessage(layout.streamOf(runId), query);
  }

  async function readBatch(runId: string, from: number, limit: number): Promise<LoggedEvent[]> {
    const events: LoggedEvent[] = [];
    try {
      const batch = await jsm.direct.getBatch(layout.streamOf(runId), {
        seq: from,
        next_by_subj: layout.subjectOf(runId),
        batch: limit,
        max_bytes: Math.floor(maxPayload(nc) / PAGE_SHARE),
      });
      for await (const m of batch) events.push(loggedEvent(m));
    } catch (err) {
      // Nothing at or after `from` is answered with a 404 status (surfacing while iterating),
      // which is an ordinary empty page.
      if (isNotFoundStatus(err)) return events;
      throw unavailable('run event log unavailable', err);
    }
    return events;
  }
}

function maxPayload(nc: NatsConnection): number {
  return nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
}

function isNotFoundStatus(err: unknown): boolean {
  return err instanceof JetStreamError && 'code' in err && err.code === 404;
}
