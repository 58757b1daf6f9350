import {
  jetstream,
  jetstreamManager,
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  PubHeaders,
  RetentionPolicy,
  StorageType,
  type ApiError,
  type ConsumerConfig,
  type ConsumerInfo,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type PubAck,
  type StreamConfig,
  type StreamInfo,
} from '@nats-io/jetstream';
import { headers as natsHeaders, nuid, TimeoutError, type NatsConnection } from '@nats-io/nats-core';
import {
  MAX_RUN_EVENT_SHARDS,
  RUN_EVENT_SHARDS_METADATA,
  runEventLayout,
  runEventStreamName,
  type ConsumerDefinition,
  type StreamDefinition,
} from '@threadwork/contracts';
import { toAppError } from './errors.js';
import type { Logger } from './logger.js';
import { decodeJson, encodeJson } from './nats.js';
import { backoffMs, retry } from './retry.js';
import { extractTraceContext, injectTraceContext, SpanKind, withSpan } from './telemetry.js';
import { waitAll } from './wait-all.js';

export type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';

const RETENTION = {
  limits: RetentionPolicy.Limits,
  workqueue: RetentionPolicy.Workqueue,
  interest: RetentionPolicy.Interest,
} as const;

export interface EnsureStreamOptions {
  /**
   * How many servers keep the stream (NATS_STREAM_REPLICAS): raised on an existing stream whose
   * count is lower, never lowered. Absent: 1 for a new stream, an existing one's count kept.
   */
  replicas?: number;
  /** Told when an existing stream keeps more replicas than asked for. */
  logger?: Logger;
  overrides?: Partial<StreamConfig>;
}

/**
 * Creates the stream, or brings its mutable settings up to date; safe to run from every replica.
 * Only the streams' owner (the runs service) does this: every other service waits for the stream
 * (`awaitStream`), since its NATS grant allows it to look streams up, not to create them.
 *
 * The replica count only grows: during a rolling upgrade that raises NATS_STREAM_REPLICAS an old
 * replica starting with the smaller value must not undo it, and lowering it by accident would drop
 * copies of the log. Lowering is an operator's deliberate act (`nats stream edit --replicas`).
 */
export async function ensureStream(
  jsm: JetStreamManager,
  def: StreamDefinition,
  opts: EnsureStreamOptions = {},
): Promise<void> {
  const stream = await createOrUpdateStream(jsm, def, opts);
  // A server older than 2.12 drops `allow_atomic` without a word and stores a batch's messages as
  // plain publishes, only the first of them conditional: what relies on batches stops here instead.
  if (def.allow_atomic && stream.config.allow_atomic !== true) {
    throw new Error(
      `stream ${def.name} does not accept atomic batches: NATS 2.12 or later is required (its JetStream dropped allow_atomic)`,
    );
  }
}

/** The stream as the server has it once created or updated. */
async function createOrUpdateStream(
  jsm: JetStreamManager,
  def: StreamDefinition,
  opts: EnsureStreamOptions,
): Promise<StreamInfo> {
  const config: Partial<StreamConfig> & { name: string } = {
    name: def.name,
    subjects: [...def.subjects],
    retention: RETENTION[def.retention],
    storage: StorageType.File,
    allow_direct: def.allow_direct ?? false,
    ...(def.allow_atomic ? { allow_atomic: true } : {}),
    max_age: (def.max_age_ms ?? 0) * 1_000_000,
    num_replicas: opts.replicas ?? 1,
    ...(def.republish ? { republish: { src: def.republish.src, dest: def.republish.dest } } : {}),
    ...(def.metadata ? { metadata: { ...def.metadata } } : {}),
    ...opts.overrides,
  };
  try {
    return await jsm.streams.add(config);
  } catch (err) {
    // "stream name already in use" with different settings: update what may be updated.
    if (err instanceof JetStreamApiError && err.code === 10058) {
      const current = (await jsm.streams.info(def.name)).config.num_replicas;
      const wanted = config.num_replicas ?? 1;
      if (opts.replicas === undefined || current > wanted) {
        if (opts.replicas !== undefined) {
          opts.logger?.warn(
            { stream: def.name, replicas: current, configured: wanted },
            'stream keeps its larger replica count; NATS_STREAM_REPLICAS never lowers it',
          );
        }
        config.num_replicas = current;
        // Only the replica count differed: creating it again with the count it has is a no-op
        // (an update that changes nothing is not: on a cluster it can go unanswered).
        const same = await createdAsIs(jsm, config);
        if (same) return same;
      }
      return await jsm.streams.update(def.name, config);
    }
    throw err;
  }
}

/** Thrown at start-up when the run event streams in place were made for another shard count. */
export class RunEventShardsMismatchError extends Error {
  constructor(
    readonly configured: number,
    readonly found: number,
    readonly stream: string,
  ) {
    super(
      `RUN_EVENT_SHARDS is ${configured}, but the run event log in place is split into ${found} stream(s) ` +
        `(found ${stream}); changing the count would orphan every run's log, so it is fixed at install — ` +
        `start with RUN_EVENT_SHARDS=${found}`,
    );
    this.name = 'RunEventShardsMismatchError';
  }
}

/** The shard count a run event stream was made for (its metadata; RUN_EVENTS from before shards: 1), or null when it does not exist. */
async function shardsOfStream(jsm: JetStreamManager, name: string): Promise<number | null> {
  try {
    const info = await jsm.streams.info(name);
    const recorded = info.config.metadata?.[RUN_EVENT_SHARDS_METADATA];
    return recorded === undefined ? 1 : Number(recorded);
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === 10059) return null;
    throw err;
  }
}

/**
 * Refuses (RunEventShardsMismatchError) when the run event streams in place were made for another
 * shard count than `shards`: a run's stream follows from its id and the count, so a new count would
 * look for every existing log in the wrong place. It looks at the streams `shards` names (each
 * records its count) and at the one stream that tells the other layout apart: RUN_EVENTS when
 * sharding, RUN_EVENTS_0 when not. Nothing in place (a new install) passes.
 */
export async function checkRunEventShards(jsm: JetStreamManager, shards: number): Promise<void> {
  const names = [...runEventLayout(shards).streams];
  names.push(shards === 1 ? runEventStreamName(0, MAX_RUN_EVENT_SHARDS) : runEventStreamName(0, 1));
  for (const name of names) {
    const found = await shardsOfStream(jsm, name);
    if (found !== null && found !== shards) throw new RunEventShardsMismatchError(shards, found, name);
  }
}

/** The stream, if adding it succeeds (it is new, or exists with exactly this config); else null. */
async function createdAsIs(
  jsm: JetStreamManager,
  config: Partial<StreamConfig> & { name: string },
): Promise<StreamInfo | null> {
  try {
    return await jsm.streams.add(config);
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === 10058) return null;
    throw err;
  }
}

/** Creates or updates a durable pull consumer. */
export async function ensureConsumer(
  jsm: JetStreamManager,
  stream: string,
  config: Partial<ConsumerConfig> & { durable_name: string },
): Promise<void> {
  const full: Partial<ConsumerConfig> = {
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ...config,
  };
  try {
    await jsm.consumers.add(stream, full);
  } catch (err) {
    if (err instanceof JetStreamApiError && err.code === 10148) {
      await jsm.consumers.update(stream, config.durable_name, full);
      return;
    }
    throw err;
  }
}

/** Creates (or brings up to date) one of the deployment's consumers, as contracts define it. */
export async function ensureDefinedConsumer(jsm: JetStreamManager, def: ConsumerDefinition): Promise<void> {
  const filter =
    def.filterSubjects.length === 1
      ? { filter_subject: def.filterSubjects[0] }
      : { filter_subjects: [...def.filterSubjects] };
  await ensureConsumer(jsm, def.stream, {
    durable_name: def.durable,
    ...filter,
    deliver_policy: def.deliver === 'new' ? DeliverPolicy.New : DeliverPolicy.All,
    max_deliver: def.maxDeliver,
    ack_wait: def.ackWaitMs * 1_000_000,
  });
}

const isNotFound = (err: unknown, code: number) => err instanceof JetStreamApiError && err.code === code;

/**
 * Waits until `look` finds what the streams' owner creates (a stream, a consumer): services may
 * start in any order, and only the runs service may create them. Says so in the log while waiting.
 */
async function awaitCreated<T>(what: string, notFoundCode: number, logger: Logger, look: () => Promise<T>): Promise<T> {
  const started = Date.now();
  let said = 0;
  return retry(look, {
    minDelayMs: 500,
    maxDelayMs: 500,
    shouldRetry: (err) => isNotFound(err, notFoundCode),
    onRetry: () => {
      const waited = Date.now() - started;
      if (waited - said >= 10_000) {
        said = waited;
        logger.warn({ waited_ms: waited }, `waiting for the runs service to create ${what}`);
      }
    },
  });
}

/** Waits for a stream the runs service creates. */
export async function awaitStream(jsm: JetStreamManager, name: string, logger: Logger): Promise<void> {
  await awaitCreated(`stream ${name}`, 10059, logger, () => jsm.streams.info(name));
}

/** Waits for a consumer the runs service creates; its info (settings included) once it exists. */
export async function awaitConsumer(
  jsm: JetStreamManager,
  stream: string,
  durable: string,
  logger: Logger,
): Promise<ConsumerInfo> {
  await awaitStream(jsm, stream, logger);
  return awaitCreated(`consumer ${durable} on ${stream}`, 10014, logger, () => jsm.consumers.info(stream, durable));
}

export interface JetStreamHandles {
  js: JetStreamClient;
  jsm: JetStreamManager;
}

/** How long a publish keeps trying through a stream leader's election by default (NATS_PUBLISH_RETRY_MS). */
export const DEFAULT_PUBLISH_RETRY_MS = 15_000;

// The publish retry window of each client, set where the client is made (jetStreamOf), so every
// publish through it retries as the deployment says without each caller passing it along.
const publishRetryWindows = new WeakMap<JetStreamClient, number>();

export async function jetStreamOf(
  nc: NatsConnection,
  { publishRetryMs = DEFAULT_PUBLISH_RETRY_MS }: { publishRetryMs?: number } = {},
): Promise<JetStreamHandles> {
  const js = jetstream(nc);
  publishRetryWindows.set(js, publishRetryMs);
  return { js, jsm: await jetstreamManager(nc) };
}

/** The publish retry window of `js` (DEFAULT_PUBLISH_RETRY_MS unless jetStreamOf was told otherwise). */
export function publishRetryWindowOf(js: JetStreamClient): number {
  return publishRetryWindows.get(js) ?? DEFAULT_PUBLISH_RETRY_MS;
}

/**
 * Whether a publish that failed so may succeed if sent again: no ack in time (the stream's leader
 * died with it, or the server was slow), or no one to take it at all (503 no responders, which the
 * client reports as `JetStreamNotEnabled`: between a leader's death and its successor's election
 * the stream's subjects have no listener). Neither says the message was not stored, so it is sent
 * again with the same Nats-Msg-Id, and a copy already stored is acked as a duplicate instead.
 */
export function isTransientPublishError(err: unknown): boolean {
  return err instanceof TimeoutError || (err instanceof Error && err.name === 'JetStreamNotEnabled');
}

/** Between retries of a publish: short at first, since an election takes about two seconds. */
export const PUBLISH_BACKOFF = { minDelayMs: 100, maxDelayMs: 1_000, jitter: true } as const;

export interface PublishOptions {
  /** Dedupe key within the stream's duplicate window: a retry with the same id is stored once. */
  msgId?: string;
  /** Optimistic concurrency on the subject: fails unless the subject's last sequence is this. */
  expectedLastSubjectSequence?: number;
  headers?: Record<string, string>;
  /** A span per publish; off for high-volume paths that trace the batch instead. */
  span?: boolean;
  /**
   * How long to keep trying after a transient failure (isTransientPublishError), with the same
   * Nats-Msg-Id and expectation; 0 tries once. By default the client's window (jetStreamOf), which
   * must stay well inside the stream's duplicate window (2 minutes) for the dedupe to hold.
   */
  retryForMs?: number;
}

/**
 * Publishes JSON to a stream with trace context, dedupe id and optional expectations. A transient
 * failure is retried (see `retryForMs`) so that a stream leader's election costs a pause rather
 * than an error; a retried publish without a Nats-Msg-Id could be stored twice, so only one with
 * an id is retried.
 */
export async function publishJson(
  js: JetStreamClient,
  subject: string,
  payload: unknown,
  opts: PublishOptions = {},
): Promise<PubAck> {
  const untilMs = opts.msgId ? (opts.retryForMs ?? publishRetryWindowOf(js)) : 0;
  const once = () =>
    untilMs > 0
      ? retry(() => publishTraced(js, subject, payload, opts), {
          ...PUBLISH_BACKOFF,
          untilMs,
          shouldRetry: isTransientPublishError,
        })
      : publishTraced(js, subject, payload, opts);
  if (opts.span === false) return once();
  // Named by the subject's first three tokens (`run.jobs.codex`, `evt.runs.run`): ids stay out of span names.
  return withSpan(
    `publish ${subject.split('.').slice(0, 3).join('.')}`,
    { kind: SpanKind.PRODUCER, attributes: { 'messaging.destination.name': subject } },
    once,
  );
}

function publishTraced(js: JetStreamClient, subject: string, payload: unknown, opts: PublishOptions): Promise<PubAck> {
  const h = natsHeaders();
  injectTraceContext(h);
  for (const [k, v] of Object.entries(opts.headers ?? {})) h.set(k, v);
  return js.publish(subject, encodeJson(payload), {
    headers: h,
    ...(opts.msgId ? { msgID: opts.msgId } : {}),
    ...(opts.expectedLastSubjectSequence !== undefined
      ? { expect: { lastSubjectSequence: opts.expectedLastSubjectSequence } }
      : {}),
  });
}

/** Core-NATS publish (signals to live runs); carries the trace context like everything else. */
export function publishSignal(nc: NatsConnection, subject: string, payload: unknown): void {
  const h = natsHeaders();
  injectTraceContext(h);
  nc.publish(subject, encodeJson(payload), { headers: h });
}

// ---------------------------------------------------------------------------------------------
// JetStream consumers

export interface ConsumeOptions {
  stream: string;
  durable: string;
  logger: Logger;
  /** Heartbeat for long handlers: extends the ack wait while work is still going. */
  progressEveryMs?: number;
}

export interface Consumer {
  stop(timeoutMs: number): Promise<void>;
}

/** A retryable failure's redelivery waits longer each time it fails again: 0.5 s doubling up to 30 s. */
const REDELIVERY_BACKOFF = { minDelayMs: 500, maxDelayMs: 30_000 };

/**
 * Consumes a durable pull consumer one message at a time per call of `handler`. A handler that
 * returns acks; one that throws a retryable AppError naks with a delay; anything else is
 * terminated (`term`), since redelivering a message that cannot succeed only repeats the failure.
 */
export async function consumeJson(
  js: JetStreamClient,
  opts: ConsumeOptions,
  handler: (payload: unknown, msg: JsMsg) => Promise<void>,
): Promise<Consumer> {
  const consumer = await js.consumers.get(opts.stream, opts.durable);
  const messages = await consumer.consume({ max_messages: 16 });
  const inflight = new Set<Promise<void>>();

  const loop = (async () => {
    for await (const msg of messages) {
      const parent = extractTraceContext(msg.headers);
      const work = withSpan(`consume ${msg.subject}`, { kind: SpanKind.CONSUMER, parent }, async () => {
        const heartbeat = opts.progressEveryMs ? setInterval(() => msg.working(), opts.progressEveryMs) : undefined;
        try {
          await handler(decodeJson(msg.data), msg);
          msg.ack();
        } catch (err) {
          const appErr = toAppError(err);
          if (appErr.retryable) {
            opts.logger.warn({ err, subject: msg.subject, redelivery: msg.info.deliveryCount }, 'retrying message');
            msg.nak(backoffMs(msg.info.deliveryCount, REDELIVERY_BACKOFF));
          } else {
            opts.logger.error({ err, subject: msg.subject }, 'message failed for good');
            msg.term(appErr.message);
          }
        } finally {
          if (heartbeat) clearInterval(heartbeat);
        }
      }).catch(() => {});
      inflight.add(work);
      void work.finally(() => inflight.delete(work));
    }
  })();

  return {
    async stop(timeoutMs) {
      await messages.close();
      await waitAll([...inflight, loop], timeoutMs);
    },
  };
}

export interface AtomicBatchMessage {
  data: Uint8Array;
  /** Nats-Msg-Id: a message stored before makes the stream refuse the whole batch. */
  msgId: string;
}

export interface AtomicBatchAck extends PubAck {
  batch: string;
  count: number;
}

/** JetStream's atomic batch headers (nats-server 2.12, ADR-50). */
const BATCH_ID = 'Nats-Batch-Id';
const BATCH_SEQUENCE = 'Nats-Batch-Sequence';
const BATCH_COMMIT = 'Nats-Batch-Commit';

/**
 * Publishes `messages` to `subject` as one atomic batch: the stream stores all of them, at
 * consecutive sequences, or none. `expectLastSubjectSequence` is checked for the batch as a whole,
 * when it is committed. Resolves with the commit's ack (its `seq` is the last message's); an
 * answered refusal rejects with the server's JetStreamApiError, no answer with a TimeoutError
 * (either way nothing says whether a batch that was not answered was stored).
 *
 * The whole batch is sent at once and only its commit asks for an answer. The server checks
 * everything at the commit: a message it could not stage leaves a gap in the batch's sequence,
 * and the commit is refused as incomplete. (`js.startBatch` waits for the first message's answer
 * before sending the rest: a round trip more per batch.)
 */
export async function publishAtomicBatch(
  nc: NatsConnection,
  subject: string,
  messages: readonly AtomicBatchMessage[],
  { expectLastSubjectSequence, timeoutMs = 5_000 }: { expectLastSubjectSequence?: number; timeoutMs?: number } = {},
): Promise<AtomicBatchAck> {
  if (messages.length < 2) throw new RangeError('an atomic batch holds two messages or more');
  const id = nuid.next();
  const headersOf = (i: number) => {
    const h = natsHeaders();
    h.set(BATCH_ID, id);
    h.set(BATCH_SEQUENCE, String(i + 1));
    h.set(PubHeaders.MsgIdHdr, messages[i]!.msgId);
    return h;
  };
  const first = headersOf(0);
  if (expectLastSubjectSequence !== undefined) {
    first.set(PubHeaders.ExpectedLastSubjectSequenceHdr, String(expectLastSubjectSequence));
  }
  nc.publish(subject, messages[0]!.data, { headers: first });
  for (let i = 1; i < messages.length - 1; i++) nc.publish(subject, messages[i]!.data, { headers: headersOf(i) });
  const commit = headersOf(messages.length - 1);
  commit.set(BATCH_COMMIT, '1');
  const reply = await nc.request(subject, messages.at(-1)!.data, { headers: commit, timeout: timeoutMs });
  const answer = decodeJson(reply.data) as Partial<AtomicBatchAck> & { error?: ApiError };
  if (answer.error) throw new JetStreamApiError(answer.error);
  if (answer.count !== messages.length || typeof answer.seq !== 'number') {
    throw new Error(`an atomic batch of ${messages.length} was answered for ${answer.count ?? 'no'} messages`);
  }
  return answer as AtomicBatchAck;
}
