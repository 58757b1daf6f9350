import { JetStreamApiCodes, JetStreamApiError, JetStreamError } from '@nats-io/jetstream';
import { STREAM_NAMES, subjects } from '@threadwork/contracts';
import {
  AppError,
  encodeJson,
  publishJson,
  SpanKind,
  unavailable,
  withSpan,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
} from '@threadwork/platform';
import type { LoggedEvent } from '../domain/event-page.js';
import { runMetrics } from '../metrics.js';

// The log of run R is the subject `run.events.R` of RUN_EVENTS; one message per event, stored
// as `{chunk, created_at}`. An event's sequence is its stream sequence (see domain/event-page.ts).

export interface LogEntry {
  /** Unique within the run: the message is published with Nats-Msg-Id `${run_id}:${key}`, so a retry is stored once. */
  key: string;
  chunk: unknown;
}

export interface EventLog {
  /** Appends in order and returns each entry's sequence (the original one for a deduplicated retry). */
  append(runId: string, entries: readonly LogEntry[], at?: Date): Promise<number[]>;
  /** The sequence of the run's last event; 0 while its log is empty. */
  lastSequence(runId: string): Promise<number>;
  /**
   * Appends one entry only if the run's last event is still the one at `last` (see lastSequence),
   * and returns its sequence; null when another event came first. A writer that decided on the log
   * as it stood thereby never lands behind an event it did not see. A deduplicated retry returns
   * the original sequence, wherever the log stands.
   */
  appendAfter(runId: string, last: number, entry: LogEntry, at?: Date): Promise<number | null>;
  /**
   * Events of the run with sequence ≥ from, at most `limit` (fewer when they would not fit one
   * reply), in O(limit) whatever the log's length.
   */
  read(runId: string, from: number, limit: number): Promise<LoggedEvent[]>;
}

interface StoredEvent {
  chunk: unknown;
  created_at: string;
}

// A page of events travels back to the caller as one NATS reply, which must fit the server's
// max_payload. Direct gets stop a batch once it has passed `max_bytes`, so a page holds at most
// that plus one event: events are kept to a quarter of max_payload and pages to a half, which
// leaves room for the reply's own JSON around them.
const EVENT_SHARE = 4;
const PAGE_SHARE = 2;
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

export function createEventLog({
  nc,
  js,
  jsm,
}: {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
}): EventLog {
  const storedEntry = ({ key, chunk }: LogEntry, at: Date) => {
    const stored: StoredEvent = { chunk, created_at: at.toISOString() };
    const size = encodeJson(stored).length;
    const maxEvent = Math.floor(maxPayload(nc) / EVENT_SHARE);
    if (size > maxEvent) {
      throw new AppError('payload_too_large', `event ${key} is ${size} bytes; at most ${maxEvent} fit`);
    }
    return { key, stored };
  };

  return {
    async append(runId, entries, at = new Date()) {
      const subject = subjects.runEvents(runId);
      const payloads = entries.map((entry) => storedEntry(entry, at));
      try {
        // Published without waiting for each ack: one connection's publishes reach the stream in
        // the order they were sent, so the events keep their order and the batch costs one round trip.
        const acks = await withSpan(
          'append run events',
          {
            kind: SpanKind.PRODUCER,
            attributes: { 'messaging.destination.name': subject, 'messaging.batch.message_count': payloads.length },
          },
          () =>
            Promise.all(
              payloads.map(({ key, stored }) =>
                publishJson(js, subject, stored, { msgId: `${runId}:${key}`, span: false }),
              ),
            ),
        );
        runMetrics().eventsAppended.add(acks.filter((ack) => !ack.duplicate).length);
        return acks.map((ack) => ack.seq);
      } catch (err) {
        throw unavailable('run event log unavailable', err);
      }
    },

    async lastSequence(runId) {
      try {
        const last = await jsm.direct.getMessage(STREAM_NAMES.runEvents, { last_by_subj: subjects.runEvents(runId) });
        return last?.seq ?? 0;
      } catch (err) {
        throw unavailable('run event log unavailable', err);
      }
    },

    async appendAfter(runId, last, entry, at = new Date()) {
      const { key, stored } = storedEntry(entry, at);
      try {
        const ack = await publishJson(js, subjects.runEvents(runId), stored, {
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

    async read(runId, from, limit) {
      const events: LoggedEvent[] = [];
      try {
        const batch = await jsm.direct.getBatch(STREAM_NAMES.runEvents, {
          seq: from,
          next_by_subj: subjects.runEvents(runId),
          batch: limit,
          max_bytes: Math.floor(maxPayload(nc) / PAGE_SHARE),
        });
        for await (const m of batch) {
          const stored = m.json<Partial<StoredEvent>>();
          events.push({
            sequence: m.seq,
            pending: m.pending,
            chunk: stored.chunk ?? null,
            created_at: typeof stored.created_at === 'string' ? stored.created_at : m.time.toISOString(),
          });
        }
      } catch (err) {
        // Nothing at or after `from` is answered with a 404 status (surfacing while iterating),
        // which is an ordinary empty page.
        if (isNotFoundStatus(err)) return events;
        throw unavailable('run event log unavailable', err);
      }
      return events;
    },
  };
}

function maxPayload(nc: NatsConnection): number {
  return nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
}

function isNotFoundStatus(err: unknown): boolean {
  return err instanceof JetStreamError && 'code' in err && err.code === 404;
}
