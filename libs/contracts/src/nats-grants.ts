import { CONSUMERS } from './consumers.js';
import { SERVICES, subjects, type ServiceName } from './subjects.js';
import { everyRunEventStreamName } from './run-event-shards.js';
import { STREAM_NAMES } from './streams.js';

// Who may do what on NATS: one table, from which the nats-server's permissions are rendered for
// the local stack, the tests, the Compose file and the chart. Every process connects as one of
// these identities (its own NKEY) and the server refuses it anything its grant does not name:
// a publish, a subscription, a JetStream API call. A connection without credentials is refused.

/** The identities that connect to NATS: each service, and the admin CLI. */
export const NATS_IDENTITIES = ['gateway', 'threads', 'runs', 'repohost', 'review', 'runner', 'admin'] as const;
export type NatsIdentity = (typeof NATS_IDENTITIES)[number];

interface StreamAccess {
  stream: string;
  /**
   * Creates the stream and every consumer on it (consumers.ts) and keeps their settings up to
   * date (`stream`: a stream that has no consumers). Everyone else only looks the stream up: it
   * waits for the owner to create it.
   */
  owns?: boolean | 'stream';
  /** Purges a subject's messages (the runs service, once a run's log is archived). */
  purge?: boolean;
  /** Reads messages by sequence or subject (direct gets). */
  directGet?: boolean;
  /** Reads a message through the stream's leader (STREAM.MSG.GET): never behind what it acked. */
  leaderGet?: boolean;
  /** Durable pull consumers it pulls from and acks (never creates); `*`: any on the stream. */
  consumers?: readonly string[];
}

interface Grant {
  /** The request/reply service it answers. */
  serves?: ServiceName;
  /** Request/reply endpoints it calls. */
  calls: readonly string[];
  /** Core and JetStream subjects it publishes to (JetStream: the streams' own subjects). */
  publishes: readonly string[];
  /** Core subjects it subscribes to. */
  subscribes: readonly string[];
  streams: readonly StreamAccess[];
}

const { threads, runs, repohost, review } = SERVICES;
const evt = (service: string) => `evt.${service}.>`;
const runSignals = subjects.runSignalAll;

const GRANTS: Record<NatsIdentity, Grant> = {
  gateway: {
    calls: [
      // Every threads endpoint but the project lookup (review's) and the runner's read of a steer.
      ...Object.values(threads.subjects).filter(
        (subject) => subject !== threads.subjects.project && subject !== threads.subjects.steerRead,
      ),
      runs.subjects.get,
      runs.subjects.cancel,
      runs.subjects.eventsPage,
      runs.subjects.interactionGet,
      runs.subjects.interactionList,
      runs.subjects.interactionAnswer,
      runs.subjects.harnesses,
      repohost.subjects.connection,
      repohost.subjects.repositories,
      repohost.subjects.installSession,
      repohost.subjects.setup,
      repohost.subjects.link,
      repohost.subjects.webhook,
      repohost.subjects.oauthClient,
      repohost.subjects.oauthUser,
      review.subjects.get,
    ],
    publishes: [subjects.keysRevoked],
    subscribes: [subjects.runLiveAll, subjects.keysRevoked],
    streams: [],
  },
  threads: {
    serves: 'threads',
    calls: [
      runs.subjects.admit,
      runs.subjects.get,
      runs.subjects.getMany,
      runs.subjects.live,
      runs.subjects.liveCount,
      // Whether the runner asking for a steer holds the run it targets.
      runs.subjects.holder,
      // Whether a runner's DOMAIN event is its run's holder's.
      runs.subjects.attestation,
      repohost.subjects.access,
    ],
    publishes: [runSignals, evt('threads')],
    subscribes: [],
    streams: [{ stream: STREAM_NAMES.domain, consumers: [CONSUMERS.threads] }],
  },
  runs: {
    serves: 'runs',
    calls: [],
    publishes: [subjects.runEventsAll, subjects.runJobsAll, runSignals, evt('runs')],
    subscribes: [],
    streams: [
      // Every name a run event stream may have (run-event-shards.ts): whatever RUN_EVENT_SHARDS a
      // deployment chose, and the ones it did not, which it looks up to refuse a changed count.
      ...everyRunEventStreamName().map((stream) =>
        stream === STREAM_NAMES.runEvents
          ? { stream, owns: true, directGet: true, leaderGet: true, purge: true }
          : { stream, owns: 'stream' as const, directGet: true, leaderGet: true, purge: true },
      ),
      { stream: STREAM_NAMES.runJobs, owns: true },
      { stream: STREAM_NAMES.domain, owns: true },
    ],
  },
  repohost: {
    serves: 'repohost',
    calls: [threads.subjects.get, runs.subjects.holder, runs.subjects.attestation],
    publishes: [evt('repohost')],
    subscribes: [],
    streams: [{ stream: STREAM_NAMES.domain, consumers: [CONSUMERS.repohost] }],
  },
  review: {
    serves: 'review',
    calls: [threads.subjects.project, runs.subjects.live, runs.subjects.attestation, repohost.subjects.publication],
    publishes: [evt('review')],
    subscribes: [],
    streams: [{ stream: STREAM_NAMES.domain, consumers: [CONSUMERS.review] }],
  },
  runner: {
    // No read for an owner (`runs.get`): the runner reads only the runs it claimed, by its claim.
    calls: [
      runs.subjects.claim,
      runs.subjects.attemptState,
      runs.subjects.release,
      runs.subjects.transition,
      runs.subjects.append,
      runs.subjects.interactionCreate,
      runs.subjects.interactionSettlement,
      runs.subjects.attest,
      repohost.subjects.token,
      threads.subjects.steerRead,
    ],
    publishes: [evt('runner')],
    subscribes: [runSignals],
    // RUN_JOBS is the runners' queue and holds nothing else: a consumer per harness the deployment
    // serves (`runner-<harness>`, created by the runs service).
    streams: [{ stream: STREAM_NAMES.runJobs, consumers: ['*'] }, { stream: STREAM_NAMES.domain }],
  },
  admin: {
    calls: [],
    // Revocations, and the service framework's discovery (which services answer, their stats).
    publishes: [
      subjects.keysRevoked,
      ...['PING', 'INFO', 'STATS'].flatMap((verb) => [`$SRV.${verb}`, `$SRV.${verb}.>`]),
    ],
    subscribes: [],
    streams: [],
  },
};

/**
 * The prefix of an identity's reply subjects: only it may subscribe there, so no other identity
 * reads its replies. Every holder of the identity's key may, though (every runner is `runner`):
 * what must reach one runner alone comes on a sealed endpoint (rpc.ts, `sealed`).
 */
export const inboxPrefix = (identity: NatsIdentity) => `_INBOX_${identity}`;

/** nats-server permissions of one user (its config's `permissions` block). */
export interface NatsPermissions {
  publish: { allow: string[] };
  subscribe: { allow: string[] };
  /** May reply to the requests it received (and only to those): services answering RPCs. */
  allow_responses?: boolean;
}

const JS = '$JS.API';

function streamApi(access: StreamAccess): string[] {
  const s = access.stream;
  const publish = [`${JS}.STREAM.INFO.${s}`];
  if (access.owns) publish.push(`${JS}.STREAM.CREATE.${s}`, `${JS}.STREAM.UPDATE.${s}`);
  if (access.purge) publish.push(`${JS}.STREAM.PURGE.${s}`);
  if (access.owns === true) {
    publish.push(
      `${JS}.CONSUMER.CREATE.${s}.*`,
      `${JS}.CONSUMER.CREATE.${s}.*.>`,
      `${JS}.CONSUMER.DURABLE.CREATE.${s}.*`,
      `${JS}.CONSUMER.INFO.${s}.*`,
    );
  }
  if (access.directGet) publish.push(`${JS}.DIRECT.GET.${s}`, `${JS}.DIRECT.GET.${s}.>`);
  if (access.leaderGet) publish.push(`${JS}.STREAM.MSG.GET.${s}`);
  for (const consumer of access.consumers ?? []) {
    publish.push(
      `${JS}.CONSUMER.INFO.${s}.${consumer}`,
      `${JS}.CONSUMER.MSG.NEXT.${s}.${consumer}`,
      `$JS.ACK.${s}.${consumer}.>`,
    );
  }
  return publish;
}

/** What `identity` may do, as nats-server permissions. */
export function natsPermissions(identity: NatsIdentity): NatsPermissions {
  const grant = GRANTS[identity];
  const publish = new Set<string>([...grant.calls, ...grant.publishes]);
  const subscribe = new Set<string>([`${inboxPrefix(identity)}.>`, ...grant.subscribes]);
  // Every service's runtime opens JetStream, which asks for the account's limits first.
  if (identity !== 'admin') publish.add(`${JS}.INFO`);
  for (const access of grant.streams) for (const subject of streamApi(access)) publish.add(subject);
  if (grant.serves) {
    const service = SERVICES[grant.serves];
    for (const subject of Object.values(service.subjects)) subscribe.add(subject);
    // The service framework's discovery: `$SRV.<verb>`, `$SRV.<verb>.<name>`, `$SRV.<verb>.<name>.<id>`.
    for (const verb of ['PING', 'INFO', 'STATS']) {
      subscribe.add(`$SRV.${verb}`);
      subscribe.add(`$SRV.${verb}.${service.name}`);
      subscribe.add(`$SRV.${verb}.${service.name}.*`);
    }
  }
  return {
    publish: { allow: [...publish] },
    subscribe: { allow: [...subscribe] },
    ...(grant.serves ? { allow_responses: true } : {}),
  };
}
