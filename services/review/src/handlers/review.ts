import {
  CandidateFailedEvent,
  CandidateProducedEvent,
  DOMAIN_INTERESTS,
  rpc,
  type ReviewEvidence,
} from '@threadwork/contracts';
import {
  describeZodError,
  invalidRequest,
  notFound,
  repositoryEventAttestation,
  request,
  route,
  type Logger,
  type NatsConnection,
  type RpcRoute,
} from '@threadwork/platform';
import type { z } from 'zod';
import { evidence } from '../domain/evidence.js';
import type { SnapshotStore } from '../store/snapshots.js';

export interface ReviewDeps {
  nc: NatsConnection;
  store: SnapshotStore;
  peerTimeoutMs: number;
  logger: Logger;
}

/** The DOMAIN subjects review reacts to: the filter of its durable consumer (consumers.ts). */
const SUBJECTS = DOMAIN_INTERESTS.review;

function parse<S extends z.ZodType>(schema: S, payload: unknown): z.output<S> {
  const parsed = schema.safeParse(payload);
  // Not retryable: the same bytes will never parse, so the consumer terminates the message.
  if (!parsed.success) throw invalidRequest(describeZodError(parsed.error));
  return parsed.data;
}

/** A candidate or its failure, as the runner publishes it about one repository of its run. */
type CandidateEvent = CandidateProducedEvent | CandidateFailedEvent;

/**
 * Whether the holder of the event's run published these very bytes about that thread, owner and
 * repository (the runs service keeps what it attested). Anyone with the runner's NATS key can
 * publish on `evt.runner.>`; what they publish alone is stored as no one's evidence.
 */
async function attested(
  { nc, peerTimeoutMs, logger }: ReviewDeps,
  subject: string,
  data: Uint8Array,
  event: CandidateEvent,
): Promise<boolean> {
  const answer = await request(nc, rpc.runs.attestation, repositoryEventAttestation(subject, data, event), {
    timeoutMs: peerTimeoutMs,
  });
  if (!answer.confirmed) {
    logger.warn(
      { run_id: event.run_id, thread_id: event.thread_id, subject, reason: answer.reason },
      'review evidence not stored: its run’s holder did not publish it',
    );
  }
  return answer.confirmed;
}

export function createEventHandler(
  deps: ReviewDeps,
): (subject: string, payload: unknown, data: Uint8Array) => Promise<void> {
  const { store, logger } = deps;
  return async (subject, payload, data) => {
    switch (subject) {
      case SUBJECTS.candidateProduced: {
        const event = parse(CandidateProducedEvent, payload);
        if (await attested(deps, subject, data, event)) await store.saveCandidate(event);
        return;
      }
      case SUBJECTS.candidateFailed: {
        const event = parse(CandidateFailedEvent, payload);
        if (await attested(deps, subject, data, event)) await store.saveFailure(event);
        return;
      }
      default:
        logger.debug({ subject }, 'ignoring DOMAIN event');
    }
  };
}

/**
 * review.get: the thread must be the owner's and the project repository one of its project's
 * (asked of threads for that one thread's project, so a foreign or unknown one is `not_found`
 * exactly as threads sees it); then
 * the snapshot, whether a run is live (asked of runs now, which is fresher than any event) and
 * the pull request (asked of repohost, which syncs it when stale).
 */
export async function getReview(
  { nc, store, peerTimeoutMs }: ReviewDeps,
  input: { owner_id: string; thread_id: string; project_repository_id: string },
): Promise<ReviewEvidence> {
  const opts = { timeoutMs: peerTimeoutMs };
  const project = await request(
    nc,
    rpc.threads.project,
    { owner_id: input.owner_id, thread_id: input.thread_id },
    opts,
  );
  if (!project.repositories.some((repository) => repository.id === input.project_repository_id)) {
    throw notFound('thread or project repository');
  }
  const [snapshot, live, publication] = await Promise.all([
    store.get(input.owner_id, input.thread_id, input.project_repository_id),
    request(nc, rpc.runs.live, { owner_id: input.owner_id, thread_id: input.thread_id }, opts),
    request(nc, rpc.repohost.publication, input, opts),
  ]);
  return evidence({
    threadId: input.thread_id,
    projectId: project.project_id,
    projectRepositoryId: input.project_repository_id,
    snapshot,
    live: live.run !== null,
    publication,
  });
}

export function reviewRoutes(deps: ReviewDeps): RpcRoute[] {
  return [route(rpc.review.get, (input) => getReview(deps, input))];
}
