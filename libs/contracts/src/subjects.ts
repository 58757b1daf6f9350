import { z } from 'zod';
// NATS subjects are built here and nowhere else, so publisher and subscriber cannot drift apart.

/** Thrown when a value cannot be one token of a subject. */
export class SubjectTokenError extends Error {
  constructor(
    readonly token: string,
    readonly role: string,
  ) {
    super(`invalid NATS subject token for ${role}: ${JSON.stringify(token)}`);
    this.name = 'SubjectTokenError';
  }
}

// `.` would split the value into several tokens, `*` and `>` would turn a publish subject into a
// wildcard, and whitespace or control characters are not allowed in subjects at all.
const FORBIDDEN_IN_TOKEN = /[.*>\s\p{Cc}]/u;

/**
 * Returns `value` if it is usable as exactly one subject token, else throws. Ids end up in
 * subjects, so a crafted id must not be able to address (or subscribe to) other runs.
 */
export function subjectToken(value: string, role = 'token'): string {
  if (value.length === 0 || FORBIDDEN_IN_TOKEN.test(value)) {
    throw new SubjectTokenError(value, role);
  }
  return value;
}

export const subjects = {
  /** RUN_EVENTS: the ordered event log of one run. */
  runEvents: (runId: string) => `run.events.${subjectToken(runId, 'runId')}`,
  runEventsAll: 'run.events.>',
  /**
   * RUN_EVENTS_<shard>: the log of one run when the log is split into several streams (see
   * run-event-shards.ts, the only place that picks between these and `runEvents`).
   */
  runEventsOfShard: (shard: number, runId: string) => `run.events.${shard}.${subjectToken(runId, 'runId')}`,
  runEventsShardAll: (shard: number) => `run.events.${shard}.*`,
  /**
   * Core NATS: RUN_EVENTS republishes every stored event here with its stream sequence
   * (`Nats-Sequence`) and the subject's previous one (`Nats-Last-Sequence`), so live followers
   * get each event once it is durable and can tell when they missed one.
   */
  runLive: (runId: string) => `run.live.${subjectToken(runId, 'runId')}`,
  runLiveAll: 'run.live.>',
  /** RUN_JOBS: admitted runs waiting for a runner of that harness. */
  runJobs: (harness: string) => `run.jobs.${subjectToken(harness, 'harness')}`,
  runJobsAll: 'run.jobs.>',
  /** Core NATS (not a stream): cancel, steer, interaction answered — published after the durable write. */
  runSignal: (runId: string) => `run.signal.${subjectToken(runId, 'runId')}`,
  runSignalAll: 'run.signal.>',
  /** DOMAIN: state changes other services react to. */
  domain: (service: string, entity: string, verb: string) =>
    `evt.${subjectToken(service, 'service')}.${subjectToken(entity, 'entity')}.${subjectToken(verb, 'verb')}`,
  domainAll: 'evt.>',
  /**
   * Core NATS: an API key was revoked (by the admin CLI, another process). Every gateway replica
   * forgets the keys it remembers, so the revoked one is refused at once, not a cache TTL later.
   */
  keysRevoked: 'gateway.keys.revoked',
} as const;

/**
 * Request/reply endpoints, one NATS service per owning service (`@nats-io/services`): `name` is
 * the service name (and queue group), each subject one endpoint. Services add endpoints here.
 */
export const SERVICES = {
  threads: {
    name: 'threads',
    subjects: {
      create: 'threads.create',
      get: 'threads.get',
      list: 'threads.list',
      work: 'threads.work',
      project: 'threads.project',
      message: 'threads.message',
      queue: 'threads.queue',
      steer: 'threads.steer',
      messages: 'threads.messages',
      controls: 'threads.controls',
      resumable: 'threads.resumable',
      steerRead: 'threads.steer.read',
    },
  },
  runs: {
    name: 'runs',
    subjects: {
      admit: 'runs.admit',
      get: 'runs.get',
      getMany: 'runs.get_many',
      live: 'runs.live',
      liveCount: 'runs.live_count',
      claim: 'runs.claim',
      cancel: 'runs.cancel',
      eventsPage: 'runs.events.page',
      transition: 'runs.transition',
      append: 'runs.append',
      interactionCreate: 'runs.interaction.create',
      interactionGet: 'runs.interaction.get',
      interactionList: 'runs.interaction.list',
      interactionAnswer: 'runs.interaction.answer',
      interactionSettlement: 'runs.interaction.settlement',
      holder: 'runs.holder',
      attemptState: 'runs.attempt.state',
      release: 'runs.release',
      attest: 'runs.attest',
      attestation: 'runs.attestation',
      harnesses: 'runs.harnesses',
    },
  },
  repohost: {
    name: 'repohost',
    subjects: {
      connection: 'repohost.connection',
      repositories: 'repohost.repositories',
      access: 'repohost.access',
      installSession: 'repohost.install_session',
      setup: 'repohost.setup',
      link: 'repohost.link',
      webhook: 'repohost.webhook',
      token: 'repohost.token',
      publication: 'repohost.publication',
      oauthClient: 'repohost.oauth_client',
      oauthUser: 'repohost.oauth_user',
    },
  },
  review: {
    name: 'review',
    subjects: {
      get: 'review.get',
      snapshot: 'review.snapshot',
    },
  },
} as const;

export type ServiceName = keyof typeof SERVICES;

/**
 * The harnesses a deployment serves, as configured (`HARNESSES`): comma-separated ids, each usable
 * as the one NATS subject token of its RUN_JOBS subject. Default: `codex`.
 */
export const harnessList = z
  .string()
  .default('codex')
  .transform((value) =>
    value
      .split(',')
      .map((h) => h.trim())
      .filter(Boolean),
  )
  .pipe(
    z
      .array(
        z.string().refine((h) => {
          try {
            subjects.runJobs(h);
            return true;
          } catch {
            return false;
          }
        }, 'each must be usable as one NATS subject token'),
      )
      .min(1, 'name at least one harness'),
  );
