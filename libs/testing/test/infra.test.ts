import { testInfra, uniqueId } from '../src/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectMongo,
  connectNats,
  createLogger,
  ensureConsumer,
  ensureIndexes,
  ensureStream,
  isDuplicateKeyError,
  jetStreamOf,
  publishJson,
  decodeJson,
  type IndexDefinition,
  type MongoClient,
  type NatsConnection,
} from '@threadwork/platform';

const logger = createLogger({ service: 'test', level: 'silent' });

describe('the real servers of the test run', () => {
  let mongo: MongoClient;
  let nc: NatsConnection;

  beforeAll(async () => {
    const { mongoUrl, natsUrl } = testInfra();
    mongo = await connectMongo({ url: mongoUrl, appName: 'platform-test' });
    nc = await connectNats({ servers: natsUrl, name: 'platform-test', logger });
  });
  afterAll(async () => {
    await mongo?.close();
    await nc?.drain();
  });

  it('writes through the Mongo driver and reads it back', async () => {
    const db = mongo.db(uniqueId('db'));
    const docs = db.collection<{ _id: string; n: number; tags: string[] }>('things');
    await docs.insertOne({ _id: 'a', n: 1, tags: ['x'] });
    await docs.updateOne({ _id: 'a' }, { $inc: { n: 41 }, $push: { tags: 'y' } });
    expect(await docs.findOne({ _id: 'a' })).toEqual({ _id: 'a', n: 42, tags: ['x', 'y'] });
  });

  it('decides "exactly one wins" with a unique index', async () => {
    const db = mongo.db(uniqueId('db'));
    const claims = db.collection<{ _id: string; run: string; attempt: number }>('claims');
    await ensureIndexes(claims, [
      { key: { run: 1, attempt: 1 }, options: { name: 'run_attempt', unique: true }, serves: 'one claim per attempt' },
    ]);
    // Idempotent: a second ensure of the same definition is a no-op.
    await ensureIndexes(claims, [
      { key: { run: 1, attempt: 1 }, options: { name: 'run_attempt', unique: true }, serves: 'one claim per attempt' },
    ]);
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => claims.insertOne({ _id: `c${i}`, run: 'r1', attempt: 1 })),
    );
    const won = results.filter((r) => r.status === 'fulfilled');
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(9);
    expect(lost.every((r) => isDuplicateKeyError(r.reason))).toBe(true);
  });

  it('finds a document by _id through its index, also when the filter has other conditions', async () => {
    const db = mongo.db(uniqueId('db'));
    const runs = db.collection<{ _id: string; status: string }>('runs');
    await runs.insertMany(Array.from({ length: 20 }, (_, i) => ({ _id: `run_${i}`, status: 'queued' })));
    // What the server says it will do: FerretDB gives SQLite's query plan, MongoDB its winning plan.
    // The FerretDB of the tests is built with a patch for this (README.md, "Local infrastructure").
    const plan = async (filter: object) =>
      JSON.stringify(await db.command({ explain: { find: 'runs', filter }, verbosity: 'queryPlanner' }));
    const byIndex = /USING INDEX|IDHACK|EXPRESS_IXSCAN|IXSCAN/;
    expect(await plan({ _id: 'run_7' })).toMatch(byIndex);
    expect(await plan({ _id: 'run_7', status: 'queued' })).toMatch(byIndex);
    // The other conditions still apply to the document found.
    expect(await runs.findOne({ _id: 'run_7', status: 'queued' })).toEqual({ _id: 'run_7', status: 'queued' });
    expect(await runs.findOne({ _id: 'run_7', status: 'running' })).toBeNull();
    const moved = await runs.updateOne({ _id: 'run_7', status: 'running' }, { $set: { status: 'completed' } });
    expect(moved.modifiedCount).toBe(0);
    expect(await runs.countDocuments({ status: 'queued' })).toBe(20);
  });

  it('ensures several indexes again from another connection (services restart, replicas start)', async () => {
    const dbName = uniqueId('db');
    const indexes: IndexDefinition[] = [
      { key: { a: 1 }, options: { name: 'a' }, serves: 'by a' },
      { key: { b: 1, c: -1 }, options: { name: 'b_c' }, serves: 'by b, newest c first' },
    ];
    await ensureIndexes(mongo.db(dbName).collection('things'), indexes);
    const other = await connectMongo({ url: testInfra().mongoUrl, appName: 'platform-test-2' });
    try {
      await ensureIndexes(other.db(dbName).collection('things'), indexes);
      const names = (await other.db(dbName).collection('things').listIndexes().toArray()).map((i) => i.name);
      expect(names).toEqual(expect.arrayContaining(['a', 'b_c']));
    } finally {
      await other.close();
    }
  });

  it('brings a durable consumer up to date when its filter changes (a new release subscribes to more)', async () => {
    const { jsm } = await jetStreamOf(nc);
    const name = uniqueId('C');
    await ensureStream(jsm, {
      name,
      description: 'test',
      subjects: [`${name}.>`],
      retention: 'limits',
      storage: 'file',
    });
    await ensureConsumer(jsm, name, { durable_name: 'svc', filter_subjects: [`${name}.a`] });
    await ensureConsumer(jsm, name, { durable_name: 'svc', filter_subjects: [`${name}.a`, `${name}.b`] });
    const info = await jsm.consumers.info(name, 'svc');
    expect(info.config.filter_subjects).toEqual([`${name}.a`, `${name}.b`]);
  });

  it('publishes to a JetStream stream and reads it back by sequence', async () => {
    const { js, jsm } = await jetStreamOf(nc);
    const name = uniqueId('S');
    const subject = `${name}.events`;
    await ensureStream(jsm, {
      name,
      description: 'test',
      subjects: [`${name}.>`],
      retention: 'limits',
      storage: 'file',
      allow_direct: true,
    });
    await ensureStream(jsm, {
      name,
      description: 'test',
      subjects: [`${name}.>`],
      retention: 'limits',
      storage: 'file',
      allow_direct: true,
    });

    const acks = [];
    for (let i = 1; i <= 5; i++) acks.push(await publishJson(js, subject, { i }, { msgId: `m${i}` }));
    // Same Nats-Msg-Id again: deduplicated, not stored twice.
    const dup = await publishJson(js, subject, { i: 1 }, { msgId: 'm1' });
    expect(dup.duplicate).toBe(true);
    expect(acks.map((a) => a.seq)).toEqual([1, 2, 3, 4, 5]);

    const third = await jsm.streams.getMessage(name, { seq: 3 });
    expect(third && decodeJson(third.data)).toEqual({ i: 3 });

    // A batch Direct Get from sequence 2 returns the rest of the log in order.
    const batch = await jsm.direct.getBatch(name, { seq: 2, batch: 10 });
    const seen: number[] = [];
    for await (const m of batch) seen.push((decodeJson(m.data) as { i: number }).i);
    expect(seen).toEqual([2, 3, 4, 5]);
  });
});
