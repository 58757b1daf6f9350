import { CandidateFailedEvent, CandidateProducedEvent, DOMAIN_INTERESTS, rpc } from '@threadwork/contracts';
import { describeZodError, invalidRequest, route, type RpcRoute } from '@threadwork/platform';
import type { z } from 'zod';
import { storeCandidate, storeFailure, type CandidateDeps } from '../flows/candidates.js';
import { getReview, type ReviewFlowDeps } from '../flows/review.js';

export type ReviewDeps = CandidateDeps & ReviewFlowDeps;

/** The DOMAIN subjects review reacts to: the filter of its durable consumer (consumers.ts). */
const SUBJECTS = DOMAIN_INTERESTS.review;

function parse<S extends z.ZodType>(schema: S, payload: unknown): z.output<S> {
  const parsed = schema.safeParse(payload);
  // Not retryable: the same bytes will never parse, so the consumer terminates the message.
  if (!parsed.success) throw invalidRequest(describeZodError(parsed.error));
  return parsed.data;
}

export function createEventHandler(
  deps: CandidateDeps,
): (subject: string, payload: unknown, data: Uint8Array) => Promise<void> {
  return async (subject, payload, data) => {
    switch (subject) {
      case SUBJECTS.candidateProduced:
        return storeCandidate(deps, subject, data, parse(CandidateProducedEvent, payload));
      case SUBJECTS.candidateFailed:
        return storeFailure(deps, subject, data, parse(CandidateFailedEvent, payload));
      default:
        deps.logger.debug({ subject }, 'ignoring DOMAIN event');
    }
  };
}

export function reviewRoutes(deps: ReviewFlowDeps): RpcRoute[] {
  return [route(rpc.review.get, (input) => getReview(deps, input))];
}
