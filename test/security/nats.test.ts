import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from '@nats-io/transport-node';
import {
  CONSUMERS,
  everyRunEventStreamName,
  NATS_IDENTITIES,
  SERVICES,
  STREAM_NAMES,
  subjects,
  type NatsIdentity,
} from '@threadwork/contracts';
import {
  connectNats,
  createLogger,
  isPlainPublish,
  jetStreamOf,
  natsAuthWithSeed,
  newNatsUserKey,
  type NatsConnection,
} from '@threadwork/platform';
import { provisionJetStream, startNatsServer, testNatsAuth, type LocalServer } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';

// What an attacker with a NATS connection could do before every service had an identity of its
// own: mint installation tokens, claim or append to any run, steer another user's run, read every
// live event, forge the events the gateway streams or the candidates repohost publishes. Played
// here against a real nats-server with the permissions the deployment renders from
// libs/contracts' grant table, as each identity, next to what that identity must still be able to do.

const logger = createLogger({ service: 'nats-security-test', level: 'silent' });
const hasBinary = Boolean(inject('natsServerBin'));

let dir: string;
let server: LocalServer;
let auth: ReturnType<typeof testNatsAuth>;
const connections = new Map<NatsIdentity, NatsConnection>();

/** What the server says to a publish: refused (permissions), or let through (no one answers here). */
async function publishes(identity: NatsIdentity, subject: string): Promise<'refused' | 'allowed'> {
  const nc = connections.get(identity)!;
  try {
    await nc.request(subject, new Uint8Array(), { timeout: 5_000 });
    return 'allowed';
  } catch (err) {
    const message = `${(err as Error).message} ${String((err as { cause?: Error }).cause?.message ?? '')}`;
    if (/permissions violation/i.test(message)) return 'refused';
    // No responders, or a JetStream API error: the server let the message through.
    return 'allowed';
  }
}

/** What the server says to a subscription: refused, or open (the server's answer to it precedes the flush's). */
async function subscribes(identity: NatsIdentity, subject: string): Promise<'refused' | 'allowed'> {
  const nc = connections.get(identity)!;
  const sub = nc.subscribe(subject);
  let refused = false;
  void sub.closed.then((err) => {
    if (err) refused = true;
  });
  await nc.flush();
  await new Promise((resolve) => setImmediate(resolve));
  if (!sub.isClosed()) sub.unsubscribe();
  return refused ? 'refused' : 'allowed';
}

describe.skipIf(!hasBinary)('NATS, as each service and as an attacker', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'threadwork-nats-security-'));
    auth = testNatsAuth();
    server = await startNatsServer({ binary: inject('natsServerBin'), dir, config: auth.config });
    for (const identity of NATS_IDENTITIES) {
      connections.set(
        identity,
        await connectNats({
          servers: server.url,
          name: `as-${identity}`,
          logger,
          giveUpAfterMs: 10_000,
          auth: natsAuthWithSeed(auth.keys[identity].seed, identity),
        }),
      );
    }
  });
  afterAll(async () => {
    for (const nc of connections.values()) await nc.close();
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a connection without credentials, and one with a key it does not know', async () => {
    await expect(connect({ servers: server.url, reconnect: false })).rejects.toThrow(/authorization/i);
    const stranger = natsAuthWithSeed(newNatsUserKey().seed);
    await expect(
      connect({ servers: server.url, reconnect: false, authenticator: stranger.authenticator! }),
    ).rejects.toThrow(/authorization/i);
  });

  it('lets only the runner mint an installation token', async () => {
    expect(await publishes('runner', SERVICES.repohost.subjects.token)).toBe('allowed');
    for (const identity of ['gateway', 'threads', 'runs', 'review', 'admin'] as const) {
      expect(await publishes(identity, SERVICES.repohost.subjects.token), identity).toBe('refused');
    }
  });

  it('lets only the runner claim, transition or append to a run', async () => {
    for (const subject of [
      SERVICES.runs.subjects.claim,
      SERVICES.runs.subjects.transition,
      SERVICES.runs.subjects.append,
    ]) {
      expect(await publishes('runner', subject)).toBe('allowed');
      for (const identity of ['gateway', 'threads', 'repohost', 'review', 'admin'] as const) {
        expect(await publishes(identity, subject), `${identity} ${subject}`).toBe('refused');
      }
    }
  });

  it('lets no one but the runs service hear the runs service’s requests, interaction answers included', async () => {
    expect(await subscribes('runs', SERVICES.runs.subjects.interactionAnswer)).toBe('allowed');
    for (const identity of ['gateway', 'threads', 'repohost', 'review', 'runner', 'admin'] as const) {
      expect(await subscribes(identity, SERVICES.runs.subjects.interactionAnswer), identity).toBe('refused');
      expect(await subscribes(identity, 'runs.>'), identity).toBe('refused');
      expect(await subscribes(identity, '>'), identity).toBe('refused');
    }
  });

  it('lets no one read another identity’s replies', async () => {
    expect(await subscribes('gateway', '_INBOX_gateway.>')).toBe('allowed');
    expect(await subscribes('runner', '_INBOX_gateway.>')).toBe('refused');
    expect(await subscribes('runner', '_INBOX.>')).toBe('refused');
    expect(await subscribes('review', '_INBOX_runner.>')).toBe('refused');
  });

  it('lets only the services that decide on a run signal it: no steer from the gateway or the runner', async () => {
    const signal = subjects.runSignal('run_someone_else');
    expect(await publishes('threads', signal)).toBe('allowed');
    expect(await publishes('runs', signal)).toBe('allowed');
    for (const identity of ['gateway', 'repohost', 'review', 'runner', 'admin'] as const) {
      expect(await publishes(identity, signal), identity).toBe('refused');
    }
    expect(await subscribes('runner', subjects.runSignal('run_1'))).toBe('allowed');
    expect(await subscribes('gateway', subjects.runSignal('run_1'))).toBe('refused');
  });

  it('lets only the gateway follow live events, and no one forge one', async () => {
    expect(await subscribes('gateway', subjects.runLive('run_1'))).toBe('allowed');
    for (const identity of ['threads', 'runs', 'repohost', 'review', 'runner', 'admin'] as const) {
      expect(await subscribes(identity, subjects.runLiveAll), identity).toBe('refused');
    }
    for (const identity of NATS_IDENTITIES) {
      expect(await publishes(identity, subjects.runLive('run_1')), identity).toBe('refused');
    }
  });

  it('lets each service publish only its own DOMAIN events: no forged candidate', async () => {
    const candidate = subjects.domain('runner', 'candidate', 'produced');
    expect(await publishes('runner', candidate)).toBe('allowed');
    for (const identity of ['gateway', 'threads', 'runs', 'repohost', 'review', 'admin'] as const) {
      expect(await publishes(identity, candidate), identity).toBe('refused');
    }
    expect(await publishes('repohost', subjects.domain('repohost', 'webhook', 'received'))).toBe('allowed');
    expect(await publishes('runner', subjects.domain('repohost', 'webhook', 'received'))).toBe('refused');
  });

  it('lets only the runs service write the event log and the job queue, or change the streams', async () => {
    expect(await publishes('runs', subjects.runEvents('run_1'))).toBe('allowed');
    expect(await publishes('runs', subjects.runJobs('codex'))).toBe('allowed');
    expect(await publishes('runs', `$JS.API.STREAM.UPDATE.${STREAM_NAMES.runEvents}`)).toBe('allowed');
    for (const identity of ['gateway', 'threads', 'repohost', 'review', 'runner', 'admin'] as const) {
      expect(await publishes(identity, subjects.runEvents('run_1')), identity).toBe('refused');
      expect(await publishes(identity, subjects.runJobs('codex')), identity).toBe('refused');
      for (const stream of Object.values(STREAM_NAMES)) {
        expect(await publishes(identity, `$JS.API.STREAM.UPDATE.${stream}`), `${identity} ${stream}`).toBe('refused');
      }
    }
    const runEventStreams = everyRunEventStreamName();
    for (const identity of NATS_IDENTITIES) {
      for (const stream of [...Object.values(STREAM_NAMES), ...runEventStreams]) {
        expect(await publishes(identity, `$JS.API.STREAM.DELETE.${stream}`), identity).toBe('refused');
        // The runs service purges an archived run's subject from its event stream; nothing else
        // is purged, by anyone.
        const purge = identity === 'runs' && runEventStreams.includes(stream) ? 'allowed' : 'refused';
        expect(await publishes(identity, `$JS.API.STREAM.PURGE.${stream}`), `${identity} ${stream}`).toBe(purge);
      }
    }
    // Every shard's stream, whatever RUN_EVENT_SHARDS a deployment chose: written and read by runs only.
    expect(await publishes('runs', subjects.runEventsOfShard(5, 'run_1'))).toBe('allowed');
    expect(await publishes('runs', `$JS.API.DIRECT.GET.${runEventStreams.at(-1)!}`)).toBe('allowed');
    for (const identity of ['gateway', 'threads', 'repohost', 'review', 'runner', 'admin'] as const) {
      expect(await publishes(identity, subjects.runEventsOfShard(5, 'run_1')), identity).toBe('refused');
      expect(await publishes(identity, `$JS.API.DIRECT.GET.${runEventStreams.at(-1)!}`), identity).toBe('refused');
    }
  });

  it('lets the runner take jobs, and only the runner; no one takes another service’s DOMAIN events', async () => {
    for (const harness of ['codex', 'claude-code']) {
      const consumer = CONSUMERS.runner(harness);
      expect(await publishes('runner', `$JS.API.CONSUMER.MSG.NEXT.${STREAM_NAMES.runJobs}.${consumer}`)).toBe(
        'allowed',
      );
      for (const identity of ['gateway', 'threads', 'runs', 'repohost', 'review', 'admin'] as const) {
        const next = `$JS.API.CONSUMER.MSG.NEXT.${STREAM_NAMES.runJobs}.${consumer}`;
        expect(await publishes(identity, next), identity).toBe('refused');
      }
    }
    // Each reacting service reads DOMAIN through its own durable consumer; no other may.
    for (const [owner, consumer] of [
      ['repohost', CONSUMERS.repohost],
      ['review', CONSUMERS.review],
      ['threads', CONSUMERS.threads],
    ] as const) {
      expect(await publishes(owner, `$JS.API.CONSUMER.MSG.NEXT.${STREAM_NAMES.domain}.${consumer}`)).toBe('allowed');
      for (const identity of NATS_IDENTITIES.filter((i) => i !== owner)) {
        const next = `$JS.API.CONSUMER.MSG.NEXT.${STREAM_NAMES.domain}.${consumer}`;
        expect(await publishes(identity, next), `${identity} ${consumer}`).toBe('refused');
      }
    }
    expect(await publishes('runner', `$JS.API.CONSUMER.CREATE.${STREAM_NAMES.domain}.spy`)).toBe('refused');
    expect(await publishes('gateway', `$JS.API.CONSUMER.CREATE.${STREAM_NAMES.domain}.spy`)).toBe('refused');
  });

  it('lets only the runs service create a stream or a consumer, its readers’ own included', async () => {
    // A consumer's settings name where JetStream delivers: a service that could create or update
    // its own could make it a push consumer delivering stream contents onto a subject another
    // service trusts (a run's signals, its live events, an endpoint). So readers only pull and ack.
    const own: [NatsIdentity, string, string][] = [
      ['threads', STREAM_NAMES.domain, CONSUMERS.threads],
      ['repohost', STREAM_NAMES.domain, CONSUMERS.repohost],
      ['review', STREAM_NAMES.domain, CONSUMERS.review],
      ['runner', STREAM_NAMES.runJobs, CONSUMERS.runner('codex')],
    ];
    for (const [identity, stream, consumer] of own) {
      for (const subject of [
        `$JS.API.CONSUMER.CREATE.${stream}.${consumer}`,
        `$JS.API.CONSUMER.CREATE.${stream}.${consumer}.evt.runs.run.status`,
        `$JS.API.CONSUMER.DURABLE.CREATE.${stream}.${consumer}`,
      ]) {
        expect(await publishes(identity, subject), `${identity} ${subject}`).toBe('refused');
        expect(await publishes('runs', subject), `runs ${subject}`).toBe('allowed');
      }
      expect(await publishes(identity, `$JS.API.CONSUMER.INFO.${stream}.${consumer}`), identity).toBe('allowed');
      for (const name of Object.values(STREAM_NAMES)) {
        expect(await publishes(identity, `$JS.API.STREAM.CREATE.${name}`), `${identity} ${name}`).toBe('refused');
      }
    }
    for (const identity of ['gateway', 'admin'] as const) {
      for (const name of Object.values(STREAM_NAMES)) {
        expect(await publishes(identity, `$JS.API.STREAM.CREATE.${name}`), `${identity} ${name}`).toBe('refused');
      }
    }
    expect(await publishes('runs', `$JS.API.STREAM.CREATE.${STREAM_NAMES.domain}`)).toBe('allowed');
  });

  it('marks a delivery a reader pulls onto another subject: it carries an ack subject, so the runner and the gateway refuse it', async () => {
    // A reader still names the reply subject of its pulls, so it can have its own consumer's
    // messages delivered onto a run's signal subject. Such a delivery always carries JetStream's
    // ack subject as its reply; a real signal is a plain publish without one.
    const admin = await connectNats({ servers: server.url, name: 'provision', logger, auth: auth.testAuth });
    try {
      await provisionJetStream(server.url, auth.testAuth);
      const signal = subjects.runSignal('run_redirected');
      const arrived = new Promise<{ reply: string | undefined }>((resolve) => {
        connections
          .get('runner')!
          .subscribe(signal, { max: 1, callback: (_err, msg) => resolve({ reply: msg.reply }) });
      });
      await connections.get('runner')!.flush();
      const { js } = await jetStreamOf(admin);
      await js.publish(subjects.domain('runs', 'run', 'status'), new TextEncoder().encode('{"stored":true}'));
      const threads = connections.get('threads')!;
      threads.publish(
        `$JS.API.CONSUMER.MSG.NEXT.${STREAM_NAMES.domain}.${CONSUMERS.threads}`,
        new TextEncoder().encode(JSON.stringify({ batch: 1, expires: 5_000_000_000 })),
        { reply: signal },
      );
      const delivered = await arrived;
      expect(delivered.reply).toMatch(/^\$JS\.ACK\./);
      expect(isPlainPublish(delivered)).toBe(false);
      expect(isPlainPublish({ reply: undefined })).toBe(true);
    } finally {
      await admin.close();
    }
  });

  it('lets only the admin identity announce a revocation besides the gateway, and the gateway hear it', async () => {
    expect(await publishes('admin', subjects.keysRevoked)).toBe('allowed');
    expect(await publishes('runner', subjects.keysRevoked)).toBe('refused');
    expect(await subscribes('gateway', subjects.keysRevoked)).toBe('allowed');
  });
});
