import { createHash } from 'node:crypto';
import {
  jetstream,
  jetstreamManager,
  AckPolicy,
  DeliverPolicy,
  JetStreamApiError,
  RetentionPolicy,
  StorageType,
  type ConsumerConfig,
  type ConsumerInfo,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type PubAck,
  type StreamConfig,
} from '@nats-io/jetstream';
import {
  headers as natsHeaders,
  NoRespondersError,
  TimeoutError,
  RequestError,
  type MsgHdrs,
  type NatsConnection,
} from '@nats-io/nats-core';
import { Svcm, type Service, type ServiceMsg } from '@nats-io/services';
import { connect } from '@nats-io/transport-node';
import {
  RpcEnvelope,
  SealedReply,
  type ConsumerDefinition,
  type RpcEndpoint,
  type StreamDefinition,
} from '@threadwork/contracts';
import type { z } from 'zod';
import { AppError, invalidRequest, toAppError, unavailable } from './errors.js';
import { newReplyKey, parseReplyKey, REPLY_KEY_HEADER, seal } from './sealed-reply.js';
import { currentRequestId, REQUEST_ID_HEADER, withRequestId } from './request-context.js';
import type { Logger } from './logger.js';
import type { NatsAuth } from './nats-auth.js';
import type { Histogram } from '@opentelemetry/api';
import { extractTraceContext, injectTraceContext, meter, SpanKind, withSpan } from './telemetry.js';

export type { NatsConnection, MsgHdrs } from '@nats-io/nats-core';
export type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
/** Builds NATS message headers, for callers that publish with headers of their own. */
export { natsHeaders };

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const encodeJson = (value: unknown): Uint8Array => encoder.encode(JSON.stringify(value));
export const decodeJson = (data: Uint8Array): unknown => JSON.parse(decoder.decode(data));
/** SHA-256 (hex) of a DOMAIN event's bytes: what its publisher attests and its readers check. */
export const domainEventDigest = (data: Uint8Array): string => createHash('sha256').update(data).digest('hex');

/** A runner's DOMAIN event about one repository of its run (a candidate, or its failure). */
interface RepositoryEventOfRun {
  run_id: string;
  thread_id: string;
  owner_id: string;
  project_repository_id: string;
  repository_id: number;
}

/**
 * What a service asks the runs service (`runs.attestation`) before acting on such an event: did
 * the run's holder publish these bytes, and is the run that thread's and owner's, with that repository?
 */
export function repositoryEventAttestation(subject: string, data: Uint8Array, event: RepositoryEventOfRun) {
  return {
    run_id: event.run_id,
    thread_id: event.thread_id,
    owner_id: event.owner_id,
    repository: { project_repository_id: event.project_repository_id, repository_id: event.repository_id },
    subject,
    digest: domainEventDigest(data),
  };
}

export interface NatsOptions {
  servers: string;
  name: string;
  logger: Logger;
  /** For a short-lived client (a CLI): fail after this long instead of waiting for the server for good. */
  giveUpAfterMs?: number;
  /** Credentials, TLS and reply prefix of the process's NATS identity (nats-auth.ts). */
  auth?: NatsAuth;
}

/**
 * Connects with unlimited reconnects: a NATS restart is an outage to ride out, not a reason to
 * exit (unless `giveUpAfterMs` says otherwise). Status changes are logged so an operator sees the gap.
 */
export async function connectNats({
  servers,
  name,
  logger,
  giveUpAfterMs,
  auth,
}: NatsOptions): Promise<NatsConnection> {
  const nc = await connect({
    servers: servers.split(',').map((s) => s.trim()),
    name,
    ...(auth?.authenticator ? { authenticator: auth.authenticator } : {}),
    ...(auth?.inboxPrefix ? { inboxPrefix: auth.inboxPrefix } : {}),
    ...(auth?.tls ? { tls: auth.tls } : {}),
    ...(giveUpAfterMs === undefined
      ? { maxReconnectAttempts: -1, reconnectTimeWait: 250, waitOnFirstConnect: true }
      : { maxReconnectAttempts: 0, waitOnFirstConnect: false, timeout: giveUpAfterMs }),
  });
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect' || status.type === 'reconnect' || status.type === 'error') {
        logger.warn(
          { nats: status.type, server: 'server' in status ? status.server : undefined },
          `nats ${status.type}`,
        );
      }
    }
  })();
  return nc;
}

/**
 * Whether the server answers a round trip now, for readiness probes: false at once while the
 * connection is down (reconnecting or closed), and false when no answer comes within `timeoutMs`
 * (a server that is connected but frozen). A flush alone would wait for the reconnect instead.
 */
export async function natsAnswers(nc: NatsConnection, timeoutMs: number): Promise<boolean> {
  if (nc.isClosed()) return false;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  try {
    return await Promise.race([nc.rtt().then(() => true), deadline]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
  }
}

const RETENTION = {
  limits: RetentionPolicy.Limits,
  workqueue: RetentionPolicy.Workqueue,
  interest: RetentionPolicy.Interest,
} as const;

/**
 * Creates the stream, or brings its mutable settings up to date; safe to run from every replica.
 * Only the streams' owner (the runs service) does this: every other service waits for the stream
 * (`awaitStream`), since its NATS grant allows it to look streams up, not to create them.
 */
export async function ensureStream(
  jsm: JetStreamManager,
  def: StreamDefinition,
  overrides: Partial<StreamConfig> = {},
): Promise<void> {
  const config: Partial<StreamConfig> & { name: string } = {
    name: def.name,
    subjects: [...def.subjects],
    retention: RETENTION[def.retention],
    storage: StorageType.File,
    allow_direct: def.allow_direct ?? false,
    max_age: (def.max_age_ms ?? 0) * 1_000_000,
    ...(def.republish ? { republish: { src: def.republish.src, dest: def.republish.dest } } : {}),
    ...overrides,
  };
  try {
    await jsm.streams.add(config);
  } catch (err) {
    // "stream name already in use" with different settings: update what may be updated.
    if (err instanceof JetStreamApiError && err.code === 10058) {
      await jsm.streams.update(def.name, config);
      return;
    }
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
  for (;;) {
    try {
      return await look();
    } catch (err) {
      if (!isNotFound(err, notFoundCode)) throw err;
    }
    const waited = Date.now() - started;
    if (waited - said >= 10_000) {
      said = waited;
      logger.warn({ waited_ms: waited }, `waiting for the runs service to create ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
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

export async function jetStreamOf(nc: NatsConnection): Promise<JetStreamHandles> {
  return { js: jetstream(nc), jsm: await jetstreamManager(nc) };
}

export interface PublishOptions {
  /** Dedupe key within the stream's duplicate window: a retry with the same id is stored once. */
  msgId?: string;
  /** Optimistic concurrency on the subject: fails unless the subject's last sequence is this. */
  expectedLastSubjectSequence?: number;
  headers?: Record<string, string>;
  /** A span per publish; off for high-volume paths that trace the batch instead. */
  span?: boolean;
}

/** Publishes JSON to a stream with trace context, dedupe id and optional expectations. */
export async function publishJson(
  js: JetStreamClient,
  subject: string,
  payload: unknown,
  opts: PublishOptions = {},
): Promise<PubAck> {
  if (opts.span === false) return publishTraced(js, subject, payload, opts);
  // Named by the subject's first three tokens (`run.jobs.codex`, `evt.runs.run`): ids stay out of span names.
  return withSpan(
    `publish ${subject.split('.').slice(0, 3).join('.')}`,
    { kind: SpanKind.PRODUCER, attributes: { 'messaging.destination.name': subject } },
    () => publishTraced(js, subject, payload, opts),
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
// Typed request/reply over @nats-io/services

export interface HandlerContext {
  headers: MsgHdrs | undefined;
  logger: Logger;
}

export type RpcHandler<E extends RpcEndpoint> = (
  request: z.output<E['request']>,
  ctx: HandlerContext,
) => Promise<z.input<E['response']>>;

export interface RpcRoute<E extends RpcEndpoint = RpcEndpoint> {
  endpoint: E;
  handler: RpcHandler<E>;
}

/** Pairs an endpoint with its handler, keeping the handler's types tied to the endpoint's schemas. */
export function route<E extends RpcEndpoint>(endpoint: E, handler: RpcHandler<E>): RpcRoute {
  return { endpoint, handler } as unknown as RpcRoute;
}

export interface RpcServer {
  service: Service;
  /** Stops taking requests and waits (up to `timeoutMs`) for those in flight to be answered. */
  stop(timeoutMs: number): Promise<void>;
}

/**
 * Serves endpoints as one NATS service (discovery, stats and PING for free). Replicas share a
 * queue group named after the service, so each request is handled once. Each request is parsed
 * with the endpoint's schema (a bad one is answered `invalid_request`), handled inside a span
 * that continues the caller's trace, and answered with an RpcEnvelope — sealed to the caller's
 * reply key for a `sealed` endpoint, which refuses (unhandled) a request that brings none.
 */
export async function serveRpc(
  nc: NatsConnection,
  info: { name: string; version: string; description?: string },
  routes: RpcRoute[],
  logger: Logger,
): Promise<RpcServer> {
  const service = await new Svcm(nc).add({
    name: info.name,
    version: info.version,
    description: info.description ?? info.name,
    queue: info.name,
  });
  const inflight = new Set<Promise<void>>();

  for (const { endpoint, handler } of routes) {
    const name = endpoint.subject.replace(/[.*>]/g, '_');
    service.addEndpoint(name, {
      subject: endpoint.subject,
      handler: (err, msg) => {
        if (err) {
          logger.error({ err, subject: endpoint.subject }, 'endpoint subscription failed');
          return;
        }
        if (!isReplyInbox(msg.reply)) {
          // Not a caller waiting for an answer: a message that names another subject to answer on
          // (to make this service publish there), or one JetStream delivered here. Never handled.
          logger.warn(
            { subject: endpoint.subject, reply: msg.reply ?? null },
            'refused a request that does not reply to an inbox',
          );
          return;
        }
        const work = withRequestId(msg.headers?.get(REQUEST_ID_HEADER), () =>
          answer(endpoint, handler, msg, logger),
        ).finally(() => inflight.delete(work));
        inflight.add(work);
      },
    });
  }

  return {
    service,
    async stop(timeoutMs) {
      await service.stop();
      await waitAll([...inflight], timeoutMs);
    },
  };
}

/**
 * Whether a request's reply subject is a caller's inbox: `_INBOX_<identity>.…` (each identity may
 * subscribe only under its own, nats-grants.ts) or the client library's default `_INBOX.…`.
 * Answering to any other subject would let a caller use this service to publish where it may not.
 */
export function isReplyInbox(reply: string | undefined): boolean {
  return reply !== undefined && /^_INBOX(_[a-z]+)?\./.test(reply);
}

/**
 * Whether a core NATS message is a plain publish, as signals, live events and revocations are.
 * One with a reply subject came some other way (a JetStream delivery redirected onto this
 * subject, a service's answer to a request that named it): it is not to be trusted.
 */
export function isPlainPublish(msg: { reply?: string | undefined }): boolean {
  return !msg.reply;
}

async function answer(
  endpoint: RpcEndpoint,
  handler: RpcHandler<RpcEndpoint>,
  msg: ServiceMsg,
  logger: Logger,
): Promise<void> {
  const parent = extractTraceContext(msg.headers);
  let replyKey: ReturnType<typeof parseReplyKey> = null;
  if (endpoint.sealed) {
    replyKey = parseReplyKey(msg.headers?.get(REPLY_KEY_HEADER));
    if (!replyKey) {
      // Its answer could only go back in clear, to an inbox every holder of the caller's key may
      // read: the request is not handled at all, and the refusal says nothing but that.
      logger.warn({ subject: endpoint.subject }, 'refused a request to a sealed endpoint without a reply key');
      const refusal = invalidRequest(`${endpoint.subject} answers only sealed: send a ${REPLY_KEY_HEADER}`);
      msg.respond(encodeJson({ ok: false, error: refusal.toJSON() } satisfies RpcEnvelope));
      return;
    }
  }
  let envelope: RpcEnvelope;
  try {
    envelope = await withSpan(
      `handle ${endpoint.subject}`,
      { kind: SpanKind.SERVER, parent, attributes: { 'messaging.destination.name': endpoint.subject } },
      async () => {
        let raw: unknown;
        try {
          raw = decodeJson(msg.data);
        } catch {
          throw invalidRequest('request is not JSON');
        }
        const parsed = endpoint.request.safeParse(raw);
        if (!parsed.success) throw invalidRequest(describeZodError(parsed.error), { issues: parsed.error.issues });
        const result = await handler(parsed.data, { headers: msg.headers, logger });
        return { ok: true as const, result };
      },
    );
  } catch (err) {
    const appErr = toAppError(err);
    if (appErr.code === 'internal') logger.error({ err, subject: endpoint.subject }, 'request failed');
    envelope = { ok: false, error: appErr.toJSON() };
  }
  msg.respond(
    encodeJson(
      replyKey ? ({ sealed: seal(replyKey, encodeJson(envelope), endpoint.subject) } satisfies SealedReply) : envelope,
    ),
  );
}

let requestHistogram: Histogram | undefined;
const requestDuration = (): Histogram =>
  (requestHistogram ??= meter().createHistogram('threadwork.nats.request.duration', {
    description: 'Duration of request/reply calls between services, per subject',
    unit: 's',
  }));

export interface RequestOptions {
  timeoutMs?: number;
}

/**
 * Calls an endpoint and returns its typed result, or throws the AppError it answered with.
 * No responder or no answer in time becomes `unavailable` (retryable): the caller maps it to 503.
 * A `sealed` endpoint is always asked with a one-time reply key, and only a reply sealed to it is
 * taken (or the responder's clear refusal): a clear result is refused as the leak it would be.
 */
export async function request<E extends RpcEndpoint>(
  nc: NatsConnection,
  endpoint: E,
  payload: z.input<E['request']>,
  opts: RequestOptions = {},
): Promise<z.output<E['response']>> {
  return withSpan(
    `request ${endpoint.subject}`,
    { kind: SpanKind.CLIENT, attributes: { 'messaging.destination.name': endpoint.subject } },
    async () => {
      const h = natsHeaders();
      injectTraceContext(h);
      const requestId = currentRequestId();
      if (requestId) h.set(REQUEST_ID_HEADER, requestId);
      const replyKey = endpoint.sealed ? newReplyKey() : null;
      if (replyKey) h.set(REPLY_KEY_HEADER, replyKey.publicKey);
      let reply;
      const started = performance.now();
      let outcome = 'ok';
      try {
        reply = await nc.request(endpoint.subject, encodeJson(payload), {
          timeout: opts.timeoutMs ?? 5_000,
          headers: h,
        });
      } catch (err) {
        outcome = 'unavailable';
        if (isUnavailableError(err)) throw unavailable(`${endpoint.subject} did not answer`, err);
        outcome = 'error';
        throw err;
      } finally {
        requestDuration().record((performance.now() - started) / 1000, {
          'messaging.destination.name': endpoint.subject,
          outcome,
        });
      }
      const envelope = replyKey ? openReply(endpoint, replyKey, reply.data) : RpcEnvelope.parse(decodeJson(reply.data));
      if (!envelope.ok) throw AppError.fromJSON(envelope.error);
      return endpoint.response.parse(envelope.result) as z.output<E['response']>;
    },
  );
}

function openReply(endpoint: RpcEndpoint, key: ReturnType<typeof newReplyKey>, data: Uint8Array): RpcEnvelope {
  const raw = decodeJson(data);
  const sealed = SealedReply.safeParse(raw);
  if (sealed.success) {
    let plain: Uint8Array;
    try {
      plain = key.open(sealed.data.sealed, endpoint.subject);
    } catch (err) {
      throw new AppError('internal', `${endpoint.subject} answered with a reply that does not open`, { cause: err });
    }
    return RpcEnvelope.parse(decodeJson(plain));
  }
  const clear = RpcEnvelope.parse(raw);
  if (clear.ok) throw new AppError('internal', `${endpoint.subject} answered in clear; a sealed reply was expected`);
  return clear;
}

function isUnavailableError(err: unknown): boolean {
  if (err instanceof NoRespondersError || err instanceof TimeoutError) return true;
  if (err instanceof RequestError) return isUnavailableError(err.cause);
  if (err instanceof Error && /no responders|timeout|closed|draining|disconnect/i.test(err.message)) return true;
  return false;
}

export function describeZodError(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid request';
  const path = issue.path.length ? issue.path.join('.') : 'body';
  return `${path}: ${issue.message}`;
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
            msg.nak(Math.min(30_000, 500 * 2 ** Math.min(msg.info.deliveryCount, 6)));
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

async function waitAll(promises: Promise<unknown>[], timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.allSettled(promises),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    }),
  ]);
  clearTimeout(timer);
}
