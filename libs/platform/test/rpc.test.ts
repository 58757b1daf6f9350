import { context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { defineEndpoint, SealedReply } from '@threadwork/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { z } from 'zod';
import { Svcm } from '@nats-io/services';
import {
  AppError,
  connectNats,
  createLogger,
  natsHeaders,
  notFound,
  REPLY_KEY_HEADER,
  request,
  route,
  serveRpc,
  type EndpointStats,
  type NatsConnection,
  type RpcServer,
} from '../src/index.js';

const logger = createLogger({ service: 'test', level: 'silent' });
const suffix = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;

const double = defineEndpoint(
  `test.${suffix}.double`,
  z.object({ n: z.number().int() }),
  z.object({ doubled: z.number() }),
);
const lookup = defineEndpoint(`test.${suffix}.lookup`, z.object({ id: z.string() }), z.object({ id: z.string() }));
const explode = defineEndpoint(`test.${suffix}.explode`, z.object({}), z.object({}));
const slow = defineEndpoint(`test.${suffix}.slow`, z.object({ ms: z.number() }), z.object({ slept: z.number() }));
const traced = defineEndpoint(`test.${suffix}.traced`, z.object({}), z.object({ traceId: z.string() }));
const nobody = defineEndpoint(`test.${suffix}.nobody`, z.object({}), z.object({}));
const counted = defineEndpoint(`test.${suffix}.counted`, z.object({ tag: z.string() }), z.object({ tag: z.string() }));
const handled: string[] = [];
const secretOf = defineEndpoint(
  `test.${suffix}.secret`,
  z.object({ tag: z.string() }),
  z.object({ secret: z.string() }),
  { sealed: true },
);
/** A sealed endpoint's twin answered in clear, as a responder that forgot to seal would. */
const unsealedTwin = defineEndpoint(`test.${suffix}.twin`, z.object({}), z.object({ secret: z.string() }), {
  sealed: true,
});
const SECRET = `S3CRET-${suffix}`;

describe('typed request/reply over NATS services', () => {
  let nc: NatsConnection;
  let server: RpcServer;
  const exporter = new InMemorySpanExporter();

  beforeAll(async () => {
    const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    provider.register();
    nc = await connectNats({ servers: inject('natsUrl'), name: 'rpc-test', logger });
    server = await serveRpc(
      nc,
      { name: `test-${suffix}`, version: '0.0.1' },
      [
        route(double, async ({ n }) => ({ doubled: n * 2 })),
        route(lookup, async ({ id }) => {
          if (id !== 'known') throw notFound('thing');
          return { id };
        }),
        route(explode, async () => {
          throw new Error('password=hunter2 leaked in a driver message');
        }),
        route(slow, async ({ ms }) => {
          // At least `ms` by the clock the stats use: a timer counts from the event loop's cached
          // time, which may be a little behind, and can fire a fraction of a millisecond early.
          const until = performance.now() + ms;
          while (performance.now() < until) {
            await new Promise((resolve) => setTimeout(resolve, Math.ceil(until - performance.now())));
          }
          return { slept: ms };
        }),
        route(traced, async () => ({ traceId: trace.getActiveSpan()?.spanContext().traceId ?? '' })),
        route(counted, async ({ tag }) => {
          handled.push(tag);
          return { tag };
        }),
        route(secretOf, async ({ tag }) => {
          handled.push(tag);
          if (tag === 'fail') throw notFound(`thing ${SECRET}`);
          return { secret: `${SECRET}:${tag}` };
        }),
      ],
      logger,
    );
  });

  afterAll(async () => {
    await nc?.drain();
    trace.disable();
    propagation.disable();
    context.disable();
  });

  it('neither handles nor answers a request whose reply subject is not an inbox', async () => {
    // A caller naming another subject to answer on would have the service publish there (a signal,
    // a live event); a JetStream delivery redirected here carries an ack subject. Both are refused.
    const elsewhere = `elsewhere.${suffix}`;
    const landed: string[] = [];
    const watch = nc.subscribe(`${elsewhere}.>`, {
      callback: (_err, msg) => {
        landed.push(msg.subject);
      },
    });
    await nc.flush();
    const body = (tag: string) => new TextEncoder().encode(JSON.stringify({ tag }));
    nc.publish(counted.subject, body('aimed-elsewhere'), { reply: `${elsewhere}.signal` });
    nc.publish(counted.subject, body('from-jetstream'), { reply: `$JS.ACK.${elsewhere}.1.1.1.1.1.1` });
    nc.publish(counted.subject, body('no-reply'));
    // Requests are taken in order: once this one is answered, the three before it were looked at.
    await expect(request(nc, counted, { tag: 'inbox' })).resolves.toEqual({ tag: 'inbox' });
    await nc.flush();
    watch.unsubscribe();
    expect(handled).toEqual(['inbox']);
    expect(landed).toEqual([]);
  });

  describe('a sealed endpoint', () => {
    it('answers sealed to the caller’s reply key: an onlooker on the inboxes sees none of the reply', async () => {
      const heard: string[] = [];
      const errorHeaders: string[] = [];
      const watch = nc.subscribe('_INBOX.>', {
        callback: (_err, msg) => {
          heard.push(new TextDecoder().decode(msg.data));
          for (const name of ['Nats-Service-Error', 'Nats-Service-Error-Code']) {
            const value = msg.headers?.get(name);
            if (value) errorHeaders.push(`${name}: ${value}`);
          }
        },
      });
      await nc.flush();
      await expect(request(nc, secretOf, { tag: 'a' })).resolves.toEqual({ secret: `${SECRET}:a` });
      const err = await request(nc, secretOf, { tag: 'fail' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).message).toBe(`thing ${SECRET} not found`);
      await nc.flush();
      watch.unsubscribe();
      expect(heard.length).toBeGreaterThanOrEqual(2);
      // Not even that one of them was refused.
      expect(errorHeaders).toEqual([]);
      for (const body of heard) {
        expect(SealedReply.safeParse(JSON.parse(body)).success, body).toBe(true);
        expect(body).not.toContain(SECRET);
      }
    });

    it('refuses, without handling it, a request that brings no usable reply key', async () => {
      const ask = async (headers?: Record<string, string>) => {
        const h = natsHeaders();
        for (const [k, v] of Object.entries(headers ?? {})) h.set(k, v);
        const reply = await nc.request(secretOf.subject, new TextEncoder().encode('{"tag":"unsealed"}'), {
          timeout: 5_000,
          headers: h,
        });
        return JSON.parse(new TextDecoder().decode(reply.data)) as unknown;
      };
      const refused = {
        ok: false,
        error: { code: 'invalid_request', retryable: false, message: expect.stringContaining(REPLY_KEY_HEADER) },
      };
      expect(await ask()).toMatchObject(refused);
      expect(await ask({ [REPLY_KEY_HEADER]: 'not-a-key' })).toMatchObject(refused);
      expect(await ask({ [REPLY_KEY_HEADER]: Buffer.alloc(32).toString('base64url') })).toMatchObject(refused);
      expect(handled).not.toContain('unsealed');
    });

    it('takes no reply in clear from a responder that did not seal it', async () => {
      const twin = nc.subscribe(unsealedTwin.subject, {
        callback: (_err, msg) => {
          msg.respond(new TextEncoder().encode(JSON.stringify({ ok: true, result: { secret: SECRET } })));
        },
      });
      await nc.flush();
      const err = await request(nc, unsealedTwin, {}).catch((e: unknown) => e);
      twin.unsubscribe();
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe('internal');
    });
  });

  it('answers errors with the NATS service error headers and counts them, timing the whole handler', async () => {
    /** The endpoint's figures from the service's STATS answer (one replica here). */
    const statsOf = async (subject: string): Promise<EndpointStats> => {
      for await (const answer of await new Svcm(nc).client().stats(`test-${suffix}`)) {
        return (answer.endpoints ?? []).find((e) => e.subject === subject)?.data as EndpointStats;
      }
      throw new Error('no STATS answer');
    };
    const before = await statsOf(lookup.subject);

    const reply = await nc.request(lookup.subject, new TextEncoder().encode('{"id":"missing"}'), { timeout: 5_000 });
    expect(reply.headers?.get('Nats-Service-Error-Code')).toBe('404');
    expect(reply.headers?.get('Nats-Service-Error')).toBe('not_found');
    expect(JSON.parse(new TextDecoder().decode(reply.data))).toMatchObject({ ok: false, error: { code: 'not_found' } });
    await expect(request(nc, lookup, { id: 'known' })).resolves.toEqual({ id: 'known' });
    const ok = await nc.request(lookup.subject, new TextEncoder().encode('{"id":"known"}'), { timeout: 5_000 });
    expect(ok.headers?.get('Nats-Service-Error') ?? '').toBe('');

    const after = await statsOf(lookup.subject);
    expect(after.requests - before.requests).toBe(3);
    expect(after.errors - before.errors).toBe(1);
    expect(after.last_error).toBe('not_found');

    // An async handler's time is its promise's, not the synchronous call's: the slow endpoint's
    // average covers at least the time it was told to sleep.
    await request(nc, slow, { ms: 120 });
    const slowStats = await statsOf(slow.subject);
    expect(slowStats.average_processing_time_ns).toBeGreaterThanOrEqual((120 * 1e6) / slowStats.requests);
  });

  it('returns the typed result', async () => {
    await expect(request(nc, double, { n: 21 })).resolves.toEqual({ doubled: 42 });
  });

  it('carries typed errors back to the caller', async () => {
    const err = await request(nc, lookup, { id: 'other' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('not_found');
    expect((err as AppError).message).toBe('thing not found');
  });

  it('answers a request that breaks the schema with invalid_request naming the field', async () => {
    const err = await request(nc, double, { n: 1.5 }).catch((e: unknown) => e);
    expect((err as AppError).code).toBe('invalid_request');
    expect((err as AppError).message).toMatch(/^n: /);
  });

  it('turns an unexpected failure into internal without leaking its message', async () => {
    const err = await request(nc, explode, {}).catch((e: unknown) => e);
    expect((err as AppError).code).toBe('internal');
    expect((err as AppError).message).not.toContain('hunter2');
  });

  it('reports a missing service as unavailable (retryable)', async () => {
    const err = await request(nc, nobody, {}, { timeoutMs: 500 }).catch((e: unknown) => e);
    expect((err as AppError).code).toBe('unavailable');
    expect((err as AppError).retryable).toBe(true);
  });

  it("continues the caller's trace in the handler through NATS headers", async () => {
    const tracer = trace.getTracer('test');
    const { clientTrace, serverTrace } = await tracer.startActiveSpan('caller', async (span) => {
      const result = await request(nc, traced, {});
      span.end();
      return { clientTrace: span.spanContext().traceId, serverTrace: result.traceId };
    });
    expect(serverTrace).toBe(clientTrace);
    const names = exporter
      .getFinishedSpans()
      .filter((s) => s.spanContext().traceId === clientTrace)
      .map((s) => s.name);
    expect(names).toEqual(expect.arrayContaining(['caller', `request ${traced.subject}`, `handle ${traced.subject}`]));
  });

  it('finishes requests in flight when stopped, then takes no more', async () => {
    const pending = request(nc, slow, { ms: 300 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await server.stop(5_000);
    await expect(pending).resolves.toEqual({ slept: 300 });
    const err = await request(nc, double, { n: 1 }, { timeoutMs: 300 }).catch((e: unknown) => e);
    expect((err as AppError).code).toBe('unavailable');
  });
});
