import {
  CandidateProducedEvent,
  ControlAppliedEvent,
  MessageCompletedEvent,
  RunStatusEvent,
  SandboxStatusEvent,
  DOMAIN_INTERESTS,
} from '@threadwork/contracts';
import { describeZodError, invalidRequest } from '@threadwork/platform';
import type { z } from 'zod';
import type { Deps } from '../flows/deps.js';
import {
  onCandidateProduced,
  onControlApplied,
  onMessageCompleted,
  onRunStatus,
  onSandboxStatus,
} from '../flows/events.js';

/** The DOMAIN subjects threads reacts to: the filter of its durable consumer (consumers.ts). */
const SUBJECTS = DOMAIN_INTERESTS.threads;

function parse<S extends z.ZodType>(schema: S, payload: unknown): z.output<S> {
  const parsed = schema.safeParse(payload);
  // Not retryable: the same bytes will never parse, so the consumer terminates the message.
  if (!parsed.success) throw invalidRequest(describeZodError(parsed.error));
  return parsed.data;
}

/** Handles one DOMAIN event by subject; anything else on the stream is not for threads. */
export function createDomainHandler(
  deps: Deps,
): (subject: string, payload: unknown, data: Uint8Array) => Promise<void> {
  return async (subject, payload, data) => {
    switch (subject) {
      case SUBJECTS.runStatus:
        return onRunStatus(deps, parse(RunStatusEvent, payload));
      case SUBJECTS.sandboxStatus:
        return onSandboxStatus(deps, subject, data, parse(SandboxStatusEvent, payload));
      case SUBJECTS.controlApplied:
        return onControlApplied(deps, subject, data, parse(ControlAppliedEvent, payload));
      case SUBJECTS.messageCompleted:
        return onMessageCompleted(deps, subject, data, parse(MessageCompletedEvent, payload));
      case SUBJECTS.candidateProduced:
        return onCandidateProduced(deps, subject, data, parse(CandidateProducedEvent, payload));
      default:
        deps.logger.debug({ subject }, 'ignoring DOMAIN event');
    }
  };
}
