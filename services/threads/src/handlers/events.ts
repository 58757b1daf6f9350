import { domainEvents } from '@threadwork/contracts';
import { onEvent, type EventRoute } from '@threadwork/platform';
import type { Deps } from '../flows/deps.js';
import {
  onCandidateProduced,
  onControlApplied,
  onMessageCompleted,
  onRunStatus,
  onSandboxStatus,
} from '../flows/events.js';

/** The DOMAIN events threads reacts to: those of its durable consumer's filter (consumers.ts). */
export function domainRoutes(deps: Deps): EventRoute[] {
  return [
    onEvent(domainEvents.runStatus, (event) => onRunStatus(deps, event)),
    onEvent(domainEvents.sandboxStatus, (event, { subject, data }) => onSandboxStatus(deps, subject, data, event)),
    onEvent(domainEvents.controlApplied, (event, { subject, data }) => onControlApplied(deps, subject, data, event)),
    onEvent(domainEvents.messageCompleted, (event, { subject, data }) =>
      onMessageCompleted(deps, subject, data, event),
    ),
    onEvent(domainEvents.candidateProduced, (event, { subject, data }) =>
      onCandidateProduced(deps, subject, data, event),
    ),
  ];
}
