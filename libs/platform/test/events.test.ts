import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { defineEvent } from '@threadwork/contracts';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { z } from 'zod';
import {
  AppError,
  connectNats,
  consumeJson,
  createLogger,
  decodeJson,
  ensureConsumer,
  eventDispatcher,
  jetStreamOf,
  onEvent,
  publishEvent,
  publishJson,
  type Consumer,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
} from '../src/index.js';

const logger = createLogger({ service: 'test', level: 'silent' });
const suffix = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
const STREAM = `EVENTS_${suffix}`;
const FULL = `EVENTS_FULL_${suffix}`;

const Greeted = z.object({ name: z.string().min(1), times: z.int().min(1).default(1) });
const greeted = defineEvent(`evt${suffix}.greeter.person.greeted`, Greeted);
const left = defineEvent(`evt${suffix}.greeter.person.left`, z.object({ name: z.string() }));
/** An event of the stream no route below takes. */
const other = defineEvent(`evt${suffix}.greeter.person.other`, z.object({}));
/** Stored by a stream that takes nothing more (max_msgs 1, discard new). */
const refused = defineEvent(`full${suffix}.greeter.person.greeted`, Greeted);

describe('DOMAIN events by their definition', () => {
  let nc: NatsConnection;
  let js: JetStreamClient;
  let jsm: JetStreamManager;

  beforeAll(async () => {
    nc = await connectNats({ servers: inject('natsUrl'), name: 'events-test', logger });
    ({ js, jsm } = await jetStreamOf(nc));
    await jsm.streams.add({ name: STREAM, subjects: [`evt${suffix}.>`], storage: StorageType.File });
    await jsm.streams.add({
      name: FULL,
      subjects: [`full${suffix}.>`],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      max_msgs: 1,
      discard: DiscardPolicy.New,
    });
  });

  afterAll(async () => {
    await jsm.streams.delete(STREAM).catch(() => undefined);
    await jsm.streams.delete(FULL).catch(() => undefined);
    await nc.close();
  });

  it('publishes the event as given, with its Nats-Msg-Id, once it matches its schema', async () => {
    const event = { name: 'ada' };
    const ack = await publishEvent(js, greeted, event, { msgId: `ada-${suffix}` });
    const again = await publishEvent(js, greeted, event, { msgId: `ada-${suffix}` });
    expect(again.duplicate).toBe(true);
    expect(again.seq).toBe(ack.seq);

    const stored = await jsm.streams.getMessage(STREAM, { seq: ack.seq });
    expect(stored?.subject).toBe(greeted.subject);
    // Not the parsed form: no default filled in, so a digest of the given event is of these bytes.
    expect(stored && decodeJson(stored.data)).toEqual({ name: 'ada' });
    expect(stored?.header.get('Nats-Msg-Id')).toBe(`ada-${suffix}`);
  });

  it('refuses an event that does not match its schema, and publishes nothing', async () => {
    const before = (await jsm.streams.info(STREAM)).state.last_seq;
    const bad = { name: '' };
    const err = await publishEvent(js, greeted, bad, { msgId: `bad-${suffix}` }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('internal');
    expect((err as AppError).retryable).toBe(false);
    expect((err as AppError).message).toContain(greeted.subject);
    expect((await jsm.streams.info(STREAM)).state.last_seq).toBe(before);
  });

  it('reports a publish the stream refuses as unavailable, for the caller to retry', async () => {
    await publishEvent(js, refused, { name: 'first' }, { msgId: `first-${suffix}` });
    const err = await publishEvent(js, refused, { name: 'second' }, { msgId: `second-${suffix}` }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).code).toBe('unavailable');
    expect((err as AppError).retryable).toBe(true);
    expect((await jsm.streams.info(FULL)).state.messages).toBe(1);
  });

  describe('consumed by the events a consumer names', () => {
    const durable = `events-${suffix}`;
    const handled: { subject: string; event: unknown; bytes: string }[] = [];
    const terminated: number[] = [];
    let consumer: Consumer;

    beforeAll(async () => {
      await ensureConsumer(jsm, STREAM, { durable_name: durable });
      const sub = nc.subscribe(`$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.${STREAM}.${durable}`, {
        callback: (_err, msg) => {
          terminated.push((decodeJson(msg.data) as { stream_seq: number }).stream_seq);
        },
      });
      await nc.flush();
      const dispatch = eventDispatcher(
        [
          onEvent(greeted, async (event, { subject, data }) => {
            // Typed by the schema, defaults applied: `times` is a number here.
            const times: number = event.times;
            handled.push({ subject, event: { ...event, times }, bytes: new TextDecoder().decode(data) });
          }),
          onEvent(left, async (event, { subject, data }) => {
            handled.push({ subject, event, bytes: new TextDecoder().decode(data) });
          }),
        ],
        logger,
      );
      consumer = await consumeJson(js, { stream: STREAM, durable, logger }, (payload, msg) =>
        dispatch(msg.subject, payload, msg.data),
      );
      return async () => {
        sub.unsubscribe();
        await consumer.stop(5_000);
      };
    });

    it('hands each event to its handler parsed by its schema; a bad payload is terminated', async () => {
      const bad = await publishJson(js, greeted.subject, { name: 42 }, { msgId: `forged-${suffix}` });
      const ignored = await publishEvent(js, other, {}, { msgId: `other-${suffix}` });
      await publishEvent(js, left, { name: 'bob' }, { msgId: `bob-${suffix}` });
      const last = await publishEvent(js, greeted, { name: 'cy', times: 2 }, { msgId: `cy-${suffix}` });

      // Every event settled, the bad payload terminated (vitest polls; its timeout is the hang guard).
      await vi.waitFor(
        async () =>
          expect((await jsm.consumers.info(STREAM, durable)).ack_floor.stream_seq).toBeGreaterThanOrEqual(last.seq),
        { timeout: 30_000, interval: 50 },
      );
      await vi.waitFor(() => expect(terminated).toContain(bad.seq), { timeout: 30_000, interval: 50 });

      // Handled concurrently, so in any order.
      expect(handled).toHaveLength(3);
      expect(handled).toEqual(
        expect.arrayContaining([
          { subject: greeted.subject, event: { name: 'ada', times: 1 }, bytes: '{"name":"ada"}' },
          { subject: left.subject, event: { name: 'bob' }, bytes: '{"name":"bob"}' },
          { subject: greeted.subject, event: { name: 'cy', times: 2 }, bytes: '{"name":"cy","times":2}' },
        ]),
      );
      // The event no route takes was acknowledged, not terminated or redelivered.
      expect(terminated).toEqual([bad.seq]);
      expect(ignored.seq).toBeLessThan(last.seq);
      const info = await jsm.consumers.info(STREAM, durable);
      expect(info.num_redelivered).toBe(0);
      expect(info.num_ack_pending).toBe(0);
    });

    it('refuses two handlers for one event', () => {
      const noop = async () => {};
      expect(() => eventDispatcher([onEvent(left, noop), onEvent(left, noop)], logger)).toThrow(left.subject);
    });
  });
});
