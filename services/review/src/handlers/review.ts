import { domainEvents, rpc } from '@threadwork/contracts';
import { onEvent, route, type EventRoute, type RpcRoute } from '@threadwork/platform';
import { storeCandidate, storeFailure, type CandidateDeps } from '../flows/candidates.js';
import { getReview, type ReviewFlowDeps } from '../flows/review.js';

export type ReviewDeps = CandidateDeps & ReviewFlowDeps;

/** The DOMAIN events review reacts to: those of its durable consumer's filter (consumers.ts). */
export function candidateRoutes(deps: CandidateDeps): EventRoute[] {
  return [
    onEvent(domainEvents.candidateProduced, (event, { subject, data }) => storeCandidate(deps, subject, data, event)),
    onEvent(domainEvents.candidateFailed, (event, { subject, data }) => storeFailure(deps, subject, data, event)),
  ];
}

export function reviewRoutes(deps: ReviewFlowDeps): RpcRoute[] {
  return [route(rpc.review.get, (input) => getReview(deps, input))];
}
