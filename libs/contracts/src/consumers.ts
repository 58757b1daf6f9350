import { domainEvents } from './internal/domain-events.js';
import type { EventDef } from './rpc.js';
import { STREAM_NAMES } from './streams.js';
import { subjects } from './subjects.js';

// Every durable consumer of the deployment, as plain data. The owner of the streams (the runs
// service) creates them all, with exactly these settings; the services that read them may only
// pull from their own and ack. Nobody else can create a consumer: a consumer's config names where
// JetStream delivers (a push consumer's `deliver_subject`), which would let any creator publish
// stream contents onto any subject, and its filter decides which events a service sees.

/** Durable consumer names, one per reacting service (shared by its replicas). */
export const CONSUMERS = {
  threads: 'threads',
  repohost: 'repohost',
  review: 'review',
  /** RUN_JOBS: one per harness, shared by every runner of it. */
  runner: (harness: string) => `runner-${harness}`,
} as const;

/** The DOMAIN events each reacting service takes: its consumer's filter. */
export const DOMAIN_INTERESTS = {
  threads: [
    domainEvents.runStatus,
    domainEvents.sandboxStatus,
    domainEvents.controlApplied,
    domainEvents.messageCompleted,
    domainEvents.candidateProduced,
  ],
  repohost: [domainEvents.candidateProduced, domainEvents.webhookReceived],
  review: [domainEvents.candidateProduced, domainEvents.candidateFailed],
} as const satisfies Record<string, readonly EventDef[]>;

type StreamName = (typeof STREAM_NAMES)[keyof typeof STREAM_NAMES];

export interface ConsumerDefinition {
  readonly stream: StreamName;
  readonly durable: string;
  readonly filterSubjects: readonly string[];
  /** `new`: only messages stored after the consumer was first created. */
  readonly deliver: 'all' | 'new';
  /** Deliveries before JetStream gives up on a message; -1 for no limit. */
  readonly maxDeliver: number;
  /** Unacknowledged (and not heartbeaten) this long, a message is delivered again. */
  readonly ackWaitMs: number;
}

/** The RUN_JOBS settings of a deployment: the runs service's JOB_ACK_WAIT_MS and JOB_MAX_DELIVER. */
export interface JobQueueSettings {
  harnesses: readonly string[];
  jobAckWaitMs: number;
  jobMaxDeliver: number;
}

const DOMAIN_ACK_WAIT_MS = 30_000;

/** Every consumer the streams' owner creates and keeps up to date. */
export function consumerDefinitions(jobs: JobQueueSettings): readonly ConsumerDefinition[] {
  const domain = (durable: string, interests: readonly EventDef[], extra: Partial<ConsumerDefinition> = {}) => ({
    stream: STREAM_NAMES.domain,
    durable,
    filterSubjects: interests.map((event) => event.subject),
    deliver: 'all' as const,
    maxDeliver: -1,
    ackWaitMs: DOMAIN_ACK_WAIT_MS,
    ...extra,
  });
  return [
    domain(CONSUMERS.threads, DOMAIN_INTERESTS.threads),
    // Candidates from before the first start have nothing to publish; a branch that never reaches
    // GitHub stops being retried after about half an hour of backoff.
    domain(CONSUMERS.repohost, DOMAIN_INTERESTS.repohost, { deliver: 'new', maxDeliver: 60 }),
    domain(CONSUMERS.review, DOMAIN_INTERESTS.review),
    ...jobs.harnesses.map((harness) => ({
      stream: STREAM_NAMES.runJobs,
      durable: CONSUMERS.runner(harness),
      filterSubjects: [subjects.runJobs(harness)],
      deliver: 'all' as const,
      maxDeliver: jobs.jobMaxDeliver,
      ackWaitMs: jobs.jobAckWaitMs,
    })),
  ];
}
