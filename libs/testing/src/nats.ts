import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JetStreamManager } from '@nats-io/jetstream';
import {
  allStreams,
  consumerDefinitions,
  DOMAIN_STREAM,
  type JobQueueSettings,
  type NatsIdentity,
} from '@threadwork/contracts';
import {
  connectNats,
  createLogger,
  ensureDefinedConsumer,
  ensureStream,
  jetStreamOf,
  natsAuthorizationConfig,
  natsAuthWithSeed,
  natsServerUsers,
  newNatsKeys,
  newNatsUserKey,
  unrestrictedNatsUser,
  type NatsAuth,
  type NatsKeys,
} from '@threadwork/platform';
import { inject } from 'vitest';
import { startNatsServer, type LocalServer } from './servers.js';
import { uniqueDbPrefix } from './env.js';
import { waitFor } from './wait.js';

export interface IsolatedNats {
  url: string;
  /** The server process, when this file started its own (to kill or restart it in a test). */
  server: LocalServer | undefined;
  /** Every identity's key, when the server enforces them (a server of this file's own). */
  keys: NatsKeys | undefined;
  /** The server's configuration text, to restart it with the same users. */
  config: string | undefined;
  /** NATS settings of a service connecting as `identity`: its URL and seed. */
  env(identity: NatsIdentity): Record<string, string>;
  /** How the test's own client connects: as a user that may do anything. */
  testAuth: NatsAuth | undefined;
  /**
   * Creates the streams and consumers as the runs service does at start (with the runs service's
   * defaults unless told otherwise): for a test that runs a service without the runs service.
   */
  provision(jobs?: Partial<JobQueueSettings>): Promise<void>;
  stop(): Promise<void>;
}

/** The streams and consumers the runs service creates, made by the test's own client. */
export async function provisionJetStream(
  url: string,
  auth: NatsAuth | undefined,
  jobs: Partial<JobQueueSettings> = {},
): Promise<void> {
  const logger = createLogger({ service: 'test-provision', level: 'silent' });
  const nc = await connectNats({ servers: url, ...(auth ? { auth } : {}), name: 'test-provision', logger });
  try {
    const { jsm } = await jetStreamOf(nc);
    for (const stream of allStreams({ runEventsMaxAgeMs: 30 * 24 * 60 * 60 * 1000 })) await ensureStream(jsm, stream);
    const settings = { harnesses: ['codex'], jobAckWaitMs: 30_000, jobMaxDeliver: -1, ...jobs };
    for (const consumer of consumerDefinitions(settings)) await ensureDefinedConsumer(jsm, consumer);
  } finally {
    await nc.close();
  }
}

/**
 * New keys for every identity, and a server configuration that admits each with its grant plus the
 * test's own client (which may do anything): for a test that starts its own nats-server.
 */
export function testNatsAuth(): { keys: NatsKeys; config: string; testAuth: NatsAuth } {
  const keys = newNatsKeys();
  const tester = newNatsUserKey();
  const config = natsAuthorizationConfig(natsServerUsers(keys, { extra: [unrestrictedNatsUser(tester)] }));
  return { keys, config, testAuth: natsAuthWithSeed(tester.seed) };
}

/**
 * A NATS server for one test file, enforcing the deployment's permissions: every service connects
 * with its own key and may do only what its grant says (libs/contracts' nats-grants.ts), so a test
 * passes only if the grants allow what the services do. Services answer request/reply in queue
 * groups named after the service, so two test files running services against one server would
 * answer each other's requests; a server per file keeps them apart. Uses the run's shared server,
 * without authorization, when no local binary is available (servers given by NATS_URL, or
 * containers): run such suites one file at a time.
 */
export async function isolatedNats(): Promise<IsolatedNats> {
  const binary = inject('natsServerBin');
  if (!binary) {
    const url = inject('natsUrl');
    return {
      url,
      server: undefined,
      keys: undefined,
      config: undefined,
      env: () => ({ NATS_URL: url, NATS_INSECURE: 'true' }),
      testAuth: undefined,
      provision: (jobs) => provisionJetStream(url, undefined, jobs),
      stop: async () => {},
    };
  }
  const { keys, config, testAuth } = testNatsAuth();
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-nats-'));
  // A refused publish or subscription fails the test that needed it; the server's own line says
  // which identity was refused what, so it is printed with the file's results.
  const violations: string[] = [];
  const onLine = (line: string) => {
    if (/Violation/.test(line)) violations.push(line.trim());
  };
  const server = await startNatsServer({ binary, dir, config, onLine });
  return {
    url: server.url,
    server,
    keys,
    config,
    env: (identity) => ({ NATS_URL: server.url, NATS_NKEY_SEED: keys[identity].seed }),
    testAuth,
    provision: (jobs) => provisionJetStream(server.url, testAuth, jobs),
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
      if (violations.length > 0) {
        process.stderr.write(
          `NATS refused these (permissions of libs/contracts' nats-grants.ts):\n${violations.join('\n')}\n`,
        );
      }
    },
  };
}

/**
 * Environment every service shares, pointed at this file's servers with a database prefix of its
 * own: pass it (plus the service's own variables) to `loadConfig(ServiceConfig, env)`. `nats` is
 * the service's NATS settings (`isolatedNats().env(identity)`).
 */
export function baseServiceEnv(nats: Record<string, string>, dbPrefix = uniqueDbPrefix()): Record<string, string> {
  return {
    ...nats,
    MONGO_URL: inject('mongoUrl'),
    MONGO_DB_PREFIX: dbPrefix,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    HEALTH_PORT: '0',
    SHUTDOWN_TIMEOUT_MS: '5000',
  };
}

/**
 * Waits until the DOMAIN consumer `durable` has handled (acted on or ignored, and acked) every
 * event up to stream sequence `seq`; without `seq`, every event of its subjects the stream holds
 * now. Its `num_pending` alone cannot say so: the server counts a new message for its consumers
 * after it has acknowledged the publish, so just after one a consumer may still read 0 pending.
 */
export async function domainHandled(jsm: JetStreamManager, durable: string, seq?: number): Promise<void> {
  const upTo = seq ?? (await lastDomainSeqOf(jsm, durable));
  await waitFor(`${durable} to handle DOMAIN up to ${upTo}`, async () => {
    const info = await jsm.consumers.info(DOMAIN_STREAM.name, durable);
    return info.ack_floor.stream_seq >= upTo && info.num_ack_pending === 0;
  });
}

/** The sequence of the last DOMAIN event `durable` takes, 0 when there is none. */
async function lastDomainSeqOf(jsm: JetStreamManager, durable: string): Promise<number> {
  const { config } = await jsm.consumers.info(DOMAIN_STREAM.name, durable);
  const subjects = config.filter_subjects ?? (config.filter_subject ? [config.filter_subject] : ['>']);
  const last = await Promise.all(
    subjects.map(
      async (subject) => (await jsm.streams.getMessage(DOMAIN_STREAM.name, { last_by_subj: subject }))?.seq ?? 0,
    ),
  );
  return Math.max(0, ...last);
}
