import { Writable } from 'node:stream';
import { allStreams, runEventLayout, STREAM_NAMES } from '@threadwork/contracts';
import {
  connectNats,
  createLogger,
  ensureStream,
  isAppError,
  jetStreamOf,
  loadConfig,
  type JetStreamClient,
  type NatsConnection,
} from '@threadwork/platform';
import { baseServiceEnv, startNatsCluster, waitFor, type NatsCluster } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RunsConfig, startRuns } from '../src/index.js';
import { createEventLog } from '../src/store/event-log.js';

// Streams kept by three servers: the runs service creates them with NATS_STREAM_REPLICAS copies,
// raises the count, never lowers it, and the event log rides out the death of a stream's leader.

const STREAMS = Object.values(STREAM_NAMES);

describe.skipIf(!inject('natsServerBin'))('streams on a three-server JetStream cluster', () => {
  let cluster: NatsCluster;
  let nc: NatsConnection;

  beforeAll(async () => {
    cluster = await startNatsCluster({ binary: inject('natsServerBin') });
    nc = await connectNats({
      servers: cluster.url,
      name: 'stream-replicas-test',
      logger: createLogger({ service: 'test', level: 'silent' }),
    });
  });

  afterAll(async () => {
    await nc?.close();
    await cluster?.stop();
  });

  const replicasOf = async () => {
    const { jsm } = await jetStreamOf(nc);
    return Promise.all(STREAMS.map(async (name) => (await jsm.streams.info(name)).config.num_replicas));
  };

  const startRunsWith = async (replicas: string) => {
    const env = { ...baseServiceEnv({ NATS_URL: cluster.url, NATS_INSECURE: 'true' }), NATS_STREAM_REPLICAS: replicas };
    const service = await startRuns(loadConfig(RunsConfig, env));
    await service.stop();
  };

  it('creates the streams with one copy by default, raises them to three, and never lowers them', async () => {
    await startRunsWith('1');
    expect(await replicasOf()).toEqual([1, 1, 1]);
    await startRunsWith('3');
    expect(await replicasOf()).toEqual([3, 3, 3]);
    await startRunsWith('1');
    expect(await replicasOf()).toEqual([3, 3, 3]);

    // The same call the runs service makes at start, with its log kept: it says what it kept.
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const logger = createLogger({ service: 'runs', level: 'info', destination });
    const { jsm } = await jetStreamOf(nc);
    for (const stream of allStreams({ runEventsMaxAgeMs: 0 })) await ensureStream(jsm, stream, { replicas: 1, logger });
    expect(await replicasOf()).toEqual([3, 3, 3]);
    const kept = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(kept.map((l) => [l.stream, l.replicas, l.configured])).toEqual(STREAMS.map((name) => [name, 3, 1]));
    expect(kept.every((l) => l.level === 'warn' && String(l.msg).includes('never lowers'))).toBe(true);
  });

  /**
   * The event log on a client whose publishes of the given message ids fail once with "no
   * responders" (what a publish meets during a leader election): after really sending the message
   * when `stored` says so (an ack lost on the way back), and after `meanwhile` when given.
   */
  interface Fault {
    stored: boolean;
    meanwhile?: () => Promise<unknown>;
  }
  const faultyLog = async (failOnce: Map<string, Fault>) => {
    const { js, jsm } = await jetStreamOf(nc);
    const faulty = new Proxy(js, {
      get(target, prop, receiver) {
        if (prop !== 'publish') return Reflect.get(target, prop, receiver) as unknown;
        return async (...args: Parameters<JetStreamClient['publish']>) => {
          const id = args[2]?.msgID;
          const fault = id === undefined ? undefined : failOnce.get(id);
          if (id === undefined || !fault) return target.publish(...args);
          failOnce.delete(id);
          if (fault.stored) await target.publish(...args);
          await fault.meanwhile?.();
          throw Object.assign(new Error('jetstream is not enabled'), { name: 'JetStreamNotEnabled' });
        };
      },
    });
    return {
      log: createEventLog({ nc, js: faulty, jsm, layout: runEventLayout(1) }),
      clean: createEventLog({ nc, js, jsm, layout: runEventLayout(1) }),
    };
  };
  const logged = async (log: ReturnType<typeof createEventLog>, runId: string) =>
    (await log.read(runId, 1, 100)).map((e) => ({ key: (e.chunk as { key: string }).key, seq: e.sequence }));
  const entries = (keys: string[]) => keys.map((key) => ({ key, chunk: { key } }));

  it('sends a batch again from its first failed entry, in order, whether or not that one was stored', async () => {
    // The usual shape during an election: the failed entry and every one after it fail unsent.
    const lost = 'run_batch_lost';
    const { log } = await faultyLog(
      new Map([
        [`${lost}:b`, { stored: false }],
        [`${lost}:c`, { stored: false }],
      ]),
    );
    const seqs = await log.append(lost, entries(['a', 'b', 'c']));
    expect(await logged(log, lost)).toEqual(['a', 'b', 'c'].map((key, i) => ({ key, seq: seqs[i] })));

    // The middle entry was stored but its ack lost: sent again, it is acked with its first sequence.
    const acked = 'run_batch_ack_lost';
    const { log: log2 } = await faultyLog(new Map([[`${acked}:b`, { stored: true }]]));
    const seqs2 = await log2.append(acked, entries(['a', 'b', 'c']));
    expect(await logged(log2, acked)).toEqual(['a', 'b', 'c'].map((key, i) => ({ key, seq: seqs2[i] })));
  });

  it("chains a resent entry after another writer's event, and never stores it after a later entry of its batch", async () => {
    // Another writer's event lands while b and c are failing: they follow it, in order.
    const other = 'run_batch_other_writer';
    const { log, clean } = await faultyLog(
      new Map<string, Fault>([
        [`${other}:b`, { stored: false, meanwhile: () => clean.append(other, entries(['other'])) }],
        [`${other}:c`, { stored: false }],
      ]),
    );
    await log.append(other, entries(['a', 'b', 'c']));
    expect((await logged(log, other)).map((e) => e.key)).toEqual(['a', 'other', 'b', 'c']);

    // b fails unsent while the pipelined c is stored: b can no longer come before c, so it is
    // refused rather than stored after it.
    const overtaken = 'run_batch_overtaken';
    const { log: log2 } = await faultyLog(new Map([[`${overtaken}:b`, { stored: false }]]));
    const err = await log2.append(overtaken, entries(['a', 'b', 'c'])).catch((e: unknown) => e);
    expect(isAppError(err) && err.code).toBe('internal');
    expect((await logged(log2, overtaken)).map((e) => e.key)).toEqual(['a', 'c']);
  });

  it('reads every acknowledged append at once, whichever replica answers the direct get', async () => {
    // Each reader is connected to one server only, so each replica answers some of the reads; a
    // follower a few messages behind its leader answers too, and a read must not stop short there.
    const logger = createLogger({ service: 'test', level: 'silent' });
    const readers = await Promise.all(
      cluster.nodes.map((node) => connectNats({ servers: node.server.url, name: `reader-${node.name}`, logger })),
    );
    try {
      const handles = await jetStreamOf(nc);
      for (const stream of allStreams({ runEventsMaxAgeMs: 0 }))
        await ensureStream(handles.jsm, stream, { replicas: 3 });
      const layout = runEventLayout(1);
      const writer = createEventLog({ nc, ...handles, layout });
      const logs = await Promise.all(
        readers.map(async (reader) =>
          createEventLog({ nc: reader, ...(await jetStreamOf(reader)), layout, replicated: true }),
        ),
      );
      const runId = 'run_read_after_append';
      const missed: string[] = [];
      for (let i = 0; i < 500; i++) {
        const [seq] = await writer.append(runId, [{ key: `${i}`, chunk: { i } }]);
        for (const [k, log] of logs.entries()) {
          const page = await log.read(runId, seq!, 10);
          const last = await log.lastSequence(runId);
          if (last !== seq || page.at(-1)?.sequence !== seq) missed.push(`${i} on n${k + 1}`);
        }
      }
      expect(missed).toEqual([]);
    } finally {
      await Promise.all(readers.map((reader) => reader.close()));
    }
  });

  it('keeps every acknowledged append exactly once and in order when the stream leader is killed', async () => {
    const { js, jsm } = await jetStreamOf(nc, { publishRetryMs: 20_000 });
    // All three copies current before the leader goes, so the election has a full follower to pick.
    const leader = await waitFor('RUN_EVENTS to have a leader and two current replicas', async () => {
      const info = await jsm.streams.info(STREAM_NAMES.runEvents);
      const replicas = info.cluster?.replicas ?? [];
      return info.cluster?.leader && replicas.length === 2 && replicas.every((r) => r.current) && info.cluster.leader;
    });

    const log = createEventLog({ nc, js, jsm, layout: runEventLayout(1) });
    const runId = 'run_replicas';
    const acknowledged: { key: string; seq: number }[] = [];
    const failures: unknown[] = [];
    let stop = false;
    const appender = (async () => {
      for (let i = 0; !stop; i++) {
        const keys = [`${i}:a`, `${i}:b`, `${i}:c`];
        try {
          const seqs = await log.append(
            runId,
            keys.map((key) => ({ key, chunk: { key } })),
          );
          keys.forEach((key, k) => acknowledged.push({ key, seq: seqs[k]! }));
        } catch (err) {
          failures.push(err);
          return;
        }
      }
    })();

    await waitFor('appends before the kill', () => acknowledged.length >= 60 || failures.length > 0);
    const before = acknowledged.length;
    await cluster.node(leader).server.stop('SIGKILL');
    const successor = await waitFor(
      'a new RUN_EVENTS leader',
      async () => {
        const info = await jsm.streams.info(STREAM_NAMES.runEvents);
        return info.cluster?.leader && info.cluster.leader !== leader && info.cluster.leader;
      },
      60_000,
      { tolerateErrors: true },
    );
    await waitFor('appends after the election', () => acknowledged.length >= before + 60 || failures.length > 0);
    stop = true;
    await appender;
    process.stdout.write(
      `leader ${leader} killed after ${before} appends; ${successor} took over; ${acknowledged.length} acknowledged\n`,
    );

    expect(failures).toEqual([]);
    const stored: { key: string; seq: number }[] = [];
    for (let from = 1; ;) {
      const page = await log.read(runId, from, 100);
      if (page.length === 0) break;
      for (const e of page) stored.push({ key: (e.chunk as { key: string }).key, seq: e.sequence });
      from = page[page.length - 1]!.sequence + 1;
    }
    expect(stored).toEqual(acknowledged);
  });
});
