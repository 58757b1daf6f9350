import { setTimeout as sleep } from 'node:timers/promises';
import { DOMAIN_STREAM, type RpcEndpoint } from '@threadwork/contracts';
import {
  AppError,
  connectMongo,
  connectNats,
  createLogger,
  jetStreamOf,
  loadConfig,
  request,
  serviceDbName,
  type Db,
  type JetStreamClient,
  type MongoClient,
  type NatsConnection,
  type StartedService,
} from '@threadwork/platform';
import { baseServiceEnv, isolatedNats, testInfra, uniqueDbPrefix, uniqueId } from '@threadwork/testing';
import type { z } from 'zod';
import { THREADS_CONSUMER, ThreadsConfig, startThreads } from '../../src/index.js';
import { serveRepohostDouble, serveRunsDouble, type RepohostDouble, type RunsDouble } from './doubles.js';

export interface Harness {
  nc: NatsConnection;
  js: JetStreamClient;
  /** threads' own database, to count what it stored. */
  db: Db;
  runs: RunsDouble;
  repohost: RepohostDouble;
  call<E extends RpcEndpoint>(endpoint: E, payload: z.input<E['request']>): Promise<z.output<E['response']>>;
  /** The AppError a call answers with (fails the test if it succeeds). */
  callError<E extends RpcEndpoint>(endpoint: E, payload: z.input<E['request']>): Promise<AppError>;
  /** A fresh owner who can see the known repositories. */
  newOwner(): string;
  /** Resolves once threads has handled (acked) every DOMAIN event up to stream sequence `seq`. */
  handledUpTo(seq: number): Promise<void>;
  stop(): Promise<void>;
}

/** Retries `check` until it passes or `timeoutMs` ends; the last failure is the test's failure. */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(25);
    }
  }
}

/**
 * A NATS server of this file's own, `replicas` threads services on it sharing one database (as
 * replicas of one deployment do), and the runs and repohost doubles. `env` overrides the services'
 * configuration.
 */
export async function startHarness({
  replicas = 1,
  env = {},
}: { replicas?: number; env?: Record<string, string> } = {}): Promise<Harness> {
  const logger = createLogger({ service: 'threads-test', level: 'silent' });
  const nats = await isolatedNats();
  await nats.provision();
  const nc = await connectNats({ servers: nats.url, auth: nats.testAuth, name: 'threads-test', logger });
  const { js, jsm } = await jetStreamOf(nc);
  const runs = await serveRunsDouble(nc, js, logger);
  const repohost = await serveRepohostDouble(nc, logger);
  const prefix = uniqueDbPrefix();
  const config = loadConfig(ThreadsConfig, { ...baseServiceEnv(nats.env('threads'), prefix), ...env });
  const services: StartedService[] = [];
  for (let i = 0; i < replicas; i += 1) services.push(await startThreads(config));
  const mongo: MongoClient = await connectMongo({ url: testInfra().mongoUrl, appName: 'threads-test' });
  const db = mongo.db(serviceDbName(prefix, 'threads'));

  const call = <E extends RpcEndpoint>(endpoint: E, payload: z.input<E['request']>) =>
    request(nc, endpoint, payload, { timeoutMs: 15_000 });

  return {
    nc,
    js,
    db,
    runs,
    repohost,
    call,
    async callError(endpoint, payload) {
      const outcome = await call(endpoint, payload).then(
        (result) => ({ result }),
        (err: unknown) => ({ err }),
      );
      if (!('err' in outcome)) throw new Error(`expected ${endpoint.subject} to fail, got ${JSON.stringify(outcome)}`);
      if (!(outcome.err instanceof AppError)) throw outcome.err;
      return outcome.err;
    },
    newOwner() {
      const owner = uniqueId('usr_');
      repohost.grant(owner);
      return owner;
    },
    async handledUpTo(seq) {
      await eventually(async () => {
        const info = await jsm.consumers.info(DOMAIN_STREAM.name, THREADS_CONSUMER);
        if (info.ack_floor.stream_seq < seq || info.num_ack_pending > 0) {
          throw new Error(`threads handled DOMAIN up to ${info.ack_floor.stream_seq}, waiting for ${seq}`);
        }
      });
    },
    async stop() {
      for (const service of services.reverse()) await service.stop();
      await runs.stop();
      await repohost.stop();
      await nc.drain();
      await mongo.close();
      await nats.stop();
    },
  };
}
