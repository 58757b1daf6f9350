import {
  headers as natsHeaders,
  NoRespondersError,
  TimeoutError,
  RequestError,
  type MsgHdrs,
  type NatsConnection,
} from '@nats-io/nats-core';
import { Svcm, type Service, type ServiceMsg } from '@nats-io/services';
import type { Histogram } from '@opentelemetry/api';
import { HTTP_STATUS_BY_CODE, RpcEnvelope, SealedReply, type ErrorCode, type RpcEndpoint } from '@threadwork/contracts';
import type { z } from 'zod';
import { AppError, invalidRequest, toAppError, unavailable } from './errors.js';
import type { Logger } from './logger.js';
import { decodeJson, encodeJson } from './nats.js';
import { currentRequestId, REQUEST_ID_HEADER, withRequestId } from './request-context.js';
import { newReplyKey, parseReplyKey, REPLY_KEY_HEADER, seal } from './sealed-reply.js';
import { extractTraceContext, injectTraceContext, meter, SpanKind, withSpan } from './telemetry.js';
import { waitAll } from './wait-all.js';

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
 * What `nats micro stats` shows for an endpoint under `data`: counts taken over the handler's whole
 * promise. nats.js times only the synchronous call of an endpoint's callback and counts an error
 * only when that call throws, so its own `processing_time` and `num_errors` stay near zero for
 * async handlers such as ours; these are the figures to read.
 */
export interface EndpointStats {
  requests: number;
  errors: number;
  last_error?: string;
  processing_time_ns: number;
  average_processing_time_ns: number;
}

class EndpointCounter {
  private requests = 0;
  private errors = 0;
  private lastError: string | undefined;
  private nanos = 0;

  count(startedNs: bigint, error: string | undefined): void {
    this.requests += 1;
    this.nanos += Number(process.hrtime.bigint() - startedNs);
    if (error !== undefined) {
      this.errors += 1;
      this.lastError = error;
    }
  }

  stats(): EndpointStats {
    return {
      requests: this.requests,
      errors: this.errors,
      ...(this.lastError !== undefined ? { last_error: this.lastError } : {}),
      processing_time_ns: this.nanos,
      average_processing_time_ns: this.requests ? Math.round(this.nanos / this.requests) : 0,
    };
  }
}

/**
 * Serves endpoints as one NATS service (discovery, stats and PING for free). Replicas share a
 * queue group named after the service, so each request is handled once. Each request is parsed
 * with the endpoint's schema (a bad one is answered `invalid_request`), handled inside a span
 * that continues the caller's trace, and answered with an RpcEnvelope — sealed to the caller's
 * reply key for a `sealed` endpoint, which refuses (unhandled) a request that brings none. An
 * error goes out through `respondError`, so NATS service clients see the standard error headers.
 */
export async function serveRpc(
  nc: NatsConnection,
  info: { name: string; version: string; description?: string },
  routes: RpcRoute[],
  logger: Logger,
): Promise<RpcServer> {
  const counters = new Map<string, EndpointCounter>();
  const service = await new Svcm(nc).add({
    name: info.name,
    version: info.version,
    description: info.description ?? info.name,
    queue: info.name,
    statsHandler: (endpoint) => Promise.resolve(counters.get(endpoint.subject)?.stats() ?? null),
  });
  const inflight = new Set<Promise<void>>();

  for (const { endpoint, handler } of routes) {
    const name = endpoint.subject.replace(/[.*>]/g, '_');
    const counter = new EndpointCounter();
    counters.set(endpoint.subject, counter);
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
        const started = process.hrtime.bigint();
        const work = withRequestId(msg.headers?.get(REQUEST_ID_HEADER), () => answer(endpoint, handler, msg, logger))
          .then((failure) => counter.count(started, failure))
          .finally(() => inflight.delete(work));
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

/** Answers one request; resolves to the error code it was answered with, if any (never rejects). */
async function answer(
  endpoint: RpcEndpoint,
  handler: RpcHandler<RpcEndpoint>,
  msg: ServiceMsg,
  logger: Logger,
): Promise<ErrorCode | undefined> {
  const parent = extractTraceContext(msg.headers);
  let replyKey: ReturnType<typeof parseReplyKey> = null;
  if (endpoint.sealed) {
    replyKey = parseReplyKey(msg.headers?.get(REPLY_KEY_HEADER));
    if (!replyKey) {
      // Its answer could only go back in clear, to an inbox every holder of the caller's key may
      // read: the request is not handled at all, and the refusal says nothing but that.
      logger.warn({ subject: endpoint.subject }, 'refused a request to a sealed endpoint without a reply key');
      const refusal = invalidRequest(`${endpoint.subject} answers only sealed: send a ${REPLY_KEY_HEADER}`);
      respondFailure(msg, refusal, encodeJson({ ok: false, error: refusal.toJSON() } satisfies RpcEnvelope));
      return refusal.code;
    }
  }
  let envelope: RpcEnvelope;
  let failure: AppError | undefined;
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
    failure = toAppError(err);
    if (failure.code === 'internal') logger.error({ err, subject: endpoint.subject }, 'request failed');
    envelope = { ok: false, error: failure.toJSON() };
  }
  const body = encodeJson(
    replyKey ? ({ sealed: seal(replyKey, encodeJson(envelope), endpoint.subject) } satisfies SealedReply) : envelope,
  );
  // A sealed reply says nothing in clear, not even that it is an error: onlookers on the caller's
  // inboxes would learn which of its requests were refused.
  if (failure && !replyKey) respondFailure(msg, failure, body);
  else msg.respond(body);
  return failure?.code;
}

/**
 * Answers with the NATS service error headers: the HTTP status of the code and the code itself,
 * never the message (it may name what only the caller may read, and a sealed reply hides it).
 * The body is the envelope as for any answer, so our callers read errors the same way.
 */
function respondFailure(msg: ServiceMsg, failure: AppError, body: Uint8Array): void {
  msg.respondError(HTTP_STATUS_BY_CODE[failure.code], failure.code, body);
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
