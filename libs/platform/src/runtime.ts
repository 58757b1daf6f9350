import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/nats-core';
import type { Db, MongoClient } from 'mongodb';
import {
  ConfigError,
  DEFAULT_MONGO_SERVER_SELECTION_TIMEOUT_MS,
  type BaseConfig,
  type ProcessConfig,
} from './config.js';
import { Lifecycle, startHealthServer } from './lifecycle.js';
import { createLogger, type Logger } from './logger.js';
import { connectMongo, foreignDatabaseProblem, mongoCall, serviceDbName } from './mongo.js';
import { DOMAIN_STREAM, type NatsIdentity } from '@threadwork/contracts';
import { eventDispatcher, type EventRoute } from './events.js';
import { awaitConsumer, consumeJson, jetStreamOf } from './jetstream.js';
import { connectNats, natsAnswers } from './nats.js';
import { serveRpc, type RpcRoute } from './rpc.js';
import { startTelemetry } from './telemetry.js';
import { natsAuthOf, plaintextNatsProblem, plaintextNatsServers } from './nats-auth.js';

export interface Runtime {
  name: string;
  logger: Logger;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** Present when the service owns collections. */
  mongo: MongoClient | undefined;
  /** This service's own database. */
  db: Db | undefined;
  lifecycle: Lifecycle;
}

export interface RuntimeOptions<M extends boolean> {
  /** The service, which is also its NATS identity. */
  name: NatsIdentity;
  /** A service that owns collections has the database settings too. */
  config: M extends true ? BaseConfig : ProcessConfig;
  /** Does this service own collections? The runner, for one, does not. */
  mongo: M;
  logger?: Logger;
}

/** A runtime of a service that owns collections: its database is always there. */
export type RuntimeWithDb = Runtime & { mongo: MongoClient; db: Db };

/**
 * What every service starts with: telemetry, a logger, NATS with JetStream, its own database and
 * (when HEALTH_PORT is set) health endpoints. Everything started is registered on the lifecycle,
 * so `lifecycle.stop()` undoes it in reverse order.
 */
export async function startRuntime(opts: RuntimeOptions<true>): Promise<RuntimeWithDb>;
export async function startRuntime(opts: RuntimeOptions<false>): Promise<Runtime>;
export async function startRuntime({
  name,
  config,
  mongo: wantMongo,
  logger: given,
}: RuntimeOptions<true> | RuntimeOptions<false>): Promise<Runtime> {
  // Before anything starts: a connection string of another service's is a configuration error.
  if (wantMongo && 'MONGO_URL' in config) {
    const foreign = foreignDatabaseProblem(config.MONGO_URL, serviceDbName(config.MONGO_DB_PREFIX, name));
    if (foreign) throw new ConfigError(`invalid configuration: MONGO_URL: ${foreign}`);
  }
  const telemetry = startTelemetry(`threadwork-${name}`);
  const logger = given ?? createLogger({ service: name, level: config.LOG_LEVEL });
  const lifecycle = new Lifecycle(logger);
  lifecycle.add('telemetry', () => telemetry.shutdown());

  try {
    const plaintext = plaintextNatsProblem(config, process.env.NODE_ENV);
    if (plaintext) throw new ConfigError(`invalid configuration: ${plaintext}`);
    if (process.env.NODE_ENV === 'production' && plaintextNatsServers(config).length > 0) {
      logger.warn('NATS_ALLOW_PLAINTEXT: NATS is reached without TLS; the network must encrypt on its own');
    }
    const auth = natsAuthOf(config, name);
    const nc = await connectNats({ servers: config.NATS_URL, name: `threadwork-${name}`, logger, auth });
    if (auth.method === 'none') {
      logger.warn('NATS_INSECURE: connected to NATS without credentials — for development only');
    }
    lifecycle.add('nats', async () => {
      if (!nc.isClosed()) await nc.drain();
    });
    const { js, jsm } = await jetStreamOf(nc, { publishRetryMs: config.NATS_PUBLISH_RETRY_MS });

    let mongo: MongoClient | undefined;
    let db: Db | undefined;
    const timeoutMs =
      'MONGO_SERVER_SELECTION_TIMEOUT_MS' in config
        ? config.MONGO_SERVER_SELECTION_TIMEOUT_MS
        : DEFAULT_MONGO_SERVER_SELECTION_TIMEOUT_MS;
    if (wantMongo && 'MONGO_URL' in config) {
      mongo = await connectMongo({
        url: config.MONGO_URL,
        appName: `threadwork-${name}`,
        serverSelectionTimeoutMs: config.MONGO_SERVER_SELECTION_TIMEOUT_MS,
        logger,
      });
      const client = mongo;
      lifecycle.add('mongo', () => client.close());
      db = mongo.db(serviceDbName(config.MONGO_DB_PREFIX, name));
    }

    if (config.HEALTH_PORT > 0) {
      const health = await startHealthServer(config.HEALTH_PORT, async () => {
        if (!(await natsAnswers(nc, timeoutMs))) return false;
        // Bounded: a database that stopped answering makes the service not ready, not the probe hang.
        const database = db;
        if (database) {
          await mongoCall(() => database.command({ ping: 1 }), { timeoutMs });
        }
        return true;
      });
      lifecycle.add('health', () => health.close());
    }

    return { name, logger, nc, js, jsm, mongo, db, lifecycle };
  } catch (err) {
    await lifecycle.stop();
    throw err;
  }
}

export interface StartedService {
  logger: Logger;
  stop(): Promise<void>;
}

/**
 * Runs a service's own setup on a started runtime; if the setup fails, everything the runtime
 * started is stopped again before the error propagates, so a failed start leaves nothing behind.
 */
export async function bootService<R extends Runtime>(
  runtime: R,
  setup: (runtime: R) => Promise<void>,
): Promise<StartedService> {
  try {
    await setup(runtime);
  } catch (err) {
    await runtime.lifecycle.stop();
    throw err;
  }
  runtime.logger.info('started');
  return { logger: runtime.logger, stop: () => runtime.lifecycle.stop() };
}

/** Serves the routes as this runtime's NATS service; stopped (and drained) with the lifecycle. */
export async function serveRoutes(
  runtime: Runtime,
  info: { name: string; version?: string },
  routes: RpcRoute[],
  drainMs: number,
): Promise<void> {
  const server = await serveRpc(
    runtime.nc,
    { name: info.name, version: info.version ?? '0.1.0' },
    routes,
    runtime.logger,
  );
  runtime.lifecycle.add(`rpc:${info.name}`, () => server.stop(drainMs));
}

export interface DomainConsumerOptions {
  /** Durable consumer name (consumers.ts): one per service, shared by its replicas (each event handled once). */
  durable: string;
  /**
   * The events this consumer takes, each with its handler (`onEvent`). A handler must be
   * idempotent: a redelivered event changes nothing the first delivery did not.
   */
  events: readonly EventRoute[];
  /** How long stopping waits for events in hand. */
  drainMs: number;
  progressEveryMs?: number;
}

/**
 * Reacts to DOMAIN events through the service's durable consumer: waits for the runs service to
 * have created it (with the filter and settings contracts give it), consumes, hands each event to
 * its route (`eventDispatcher`), and stops with the lifecycle.
 */
export async function consumeDomain(runtime: Runtime, opts: DomainConsumerOptions): Promise<void> {
  const dispatch = eventDispatcher(opts.events, runtime.logger);
  await awaitConsumer(runtime.jsm, DOMAIN_STREAM.name, opts.durable, runtime.logger);
  const consumer = await consumeJson(
    runtime.js,
    {
      stream: DOMAIN_STREAM.name,
      durable: opts.durable,
      logger: runtime.logger,
      ...(opts.progressEveryMs ? { progressEveryMs: opts.progressEveryMs } : {}),
    },
    (payload, msg) => dispatch(msg.subject, payload, msg.data),
  );
  runtime.lifecycle.add(`domain-consumer:${opts.durable}`, () => consumer.stop(opts.drainMs));
}
