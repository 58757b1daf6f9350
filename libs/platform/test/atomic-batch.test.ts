import { JetStreamApiCodes, JetStreamApiError, StorageType } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  connectNats,
  createLogger,
  decodeJson,
  encodeJson,
  jetStreamOf,
  publishAtomicBatch,
  type JetStreamManager,
  type NatsConnection,
} from '../src/index.js';

const logger = createLogger({ service: 'test', level: 'silent' });
const suffix = `${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
const STREAM = `ATOMIC_${suffix}`;
const PLAIN = `PLAIN_${suffix}`;
const SMALL = `SMALL_${suffix}`;
/** nats-server's JSAtomicPublishIncompleteBatchErr (no name in the client's codes). */
const INCOMPLETE_BATCH = 10176;

describe('atomic batches, sent at once and answered at their commit', () => {
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let subjectCount = 0;
  const freshSubject = (prefix = `atomic${suffix}`) => `${prefix}.s${++subjectCount}`;

  const batch = (subject: string, n: number, from = 0) =>
    Array.from({ length: n }, (_, i) => ({ data: encodeJson({ n: from + i }), msgId: `${subject}:${from + i}` }));

  /** What the stream holds on `subject`, in order. */
  async function storedOn(stream: string, subject: string): Promise<{ seq: number; n: number; id: string }[]> {
    const out: { seq: number; n: number; id: string }[] = [];
    const info = await jsm.streams.info(stream, { subjects_filter: subject });
    if (!info.state.subjects?.[subject]) return out;
    const msgs = await jsm.direct.getBatch(stream, { seq: 1, next_by_subj: subject, batch: 1_000 });
    for await (const m of msgs) {
      out.push({ seq: m.seq, n: (decodeJson(m.data) as { n: number }).n, id: m.header.get('Nats-Msg-Id') });
    }
    return out;
  }

  const streams = [
    { name: STREAM, subjects: [`atomic${suffix}.>`], allow_atomic: true },
    { name: PLAIN, subjects: [`plain${suffix}.>`] },
    // Messages of at most 300 bytes, headers included.
    { name: SMALL, subjects: [`small${suffix}.>`], allow_atomic: true, max_msg_size: 300 },
  ];

  beforeAll(async () => {
    nc = await connectNats({ servers: inject('natsUrl'), name: 'atomic-batch-test', logger });
    ({ jsm } = await jetStreamOf(nc));
    for (const stream of streams) {
      await jsm.streams.add({ storage: StorageType.File, allow_direct: true, ...stream });
    }
  });

  afterAll(async () => {
    for (const { name } of streams) await jsm.streams.delete(name).catch(() => undefined);
    await nc.close();
  });

  it('stores every message at consecutive sequences, behind the expected last one, and acks the last', async () => {
    const subject = freshSubject();
    const first = await publishAtomicBatch(nc, subject, batch(subject, 3), { expectLastSubjectSequence: 0 });
    expect(first.count).toBe(3);
    // Another subject's message between the batches: the expectation is the subject's own.
    await publishAtomicBatch(nc, freshSubject(), batch('other', 2));
    const second = await publishAtomicBatch(nc, subject, batch(subject, 250, 3), {
      expectLastSubjectSequence: first.seq,
    });
    expect(second.count).toBe(250);

    const stored = await storedOn(STREAM, subject);
    expect(stored.map((m) => m.n)).toEqual(Array.from({ length: 253 }, (_, i) => i));
    expect(stored.map((m) => m.id)).toEqual(stored.map((m) => `${subject}:${m.n}`));
    expect(stored.slice(3).map((m) => m.seq)).toEqual(stored.slice(3).map((_, i) => second.seq - 249 + i));
    expect(stored[2]!.seq).toBe(first.seq);
  });

  it('stores nothing of a batch whose subject moved on from the expected last message', async () => {
    const subject = freshSubject();
    const first = await publishAtomicBatch(nc, subject, batch(subject, 2), { expectLastSubjectSequence: 0 });
    const err = await publishAtomicBatch(nc, subject, batch(subject, 5, 2), {
      expectLastSubjectSequence: first.seq - 1,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JetStreamApiError);
    expect((err as JetStreamApiError).code).toBe(JetStreamApiCodes.StreamWrongLastSequence);
    expect((await storedOn(STREAM, subject)).map((m) => m.n)).toEqual([0, 1]);
  });

  it('stores nothing of a batch holding a message stored before', async () => {
    const subject = freshSubject();
    await publishAtomicBatch(nc, subject, batch(subject, 2));
    // The second message repeats the first batch's last (same Nats-Msg-Id).
    const repeat = [...batch(subject, 1, 5), ...batch(subject, 1, 1), ...batch(subject, 1, 6)];
    await expect(publishAtomicBatch(nc, subject, repeat)).rejects.toBeInstanceOf(JetStreamApiError);
    expect((await storedOn(STREAM, subject)).map((m) => m.n)).toEqual([0, 1]);
  });

  it('stores nothing of a batch one of whose messages the stream refused on the way, unanswered', async () => {
    // Only the commit asks for an answer: the middle message, too large for the stream, is refused
    // without a word, and the commit finds the batch incomplete.
    const subject = freshSubject(`small${suffix}`);
    const messages = batch(subject, 5);
    messages[2] = { data: encodeJson({ n: 2, pad: 'x'.repeat(400) }), msgId: `${subject}:2` };
    const err = await publishAtomicBatch(nc, subject, messages).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JetStreamApiError);
    expect((err as JetStreamApiError).code).toBe(INCOMPLETE_BATCH);
    expect(await storedOn(SMALL, subject)).toEqual([]);
    // The stream takes a batch that fits.
    await publishAtomicBatch(nc, subject, batch(subject, 3, 10));
    expect((await storedOn(SMALL, subject)).map((m) => m.n)).toEqual([10, 11, 12]);
  });

  it('is refused by a stream that takes no atomic batches, which stores none of it', async () => {
    const subject = freshSubject(`plain${suffix}`);
    const err = await publishAtomicBatch(nc, subject, batch(subject, 3)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JetStreamApiError);
    expect((await jsm.streams.info(PLAIN)).state.messages).toBe(0);
  });

  it('takes two messages or more', async () => {
    const subject = freshSubject();
    await expect(publishAtomicBatch(nc, subject, batch(subject, 1))).rejects.toThrow(RangeError);
    expect(await storedOn(STREAM, subject)).toEqual([]);
  });
});
