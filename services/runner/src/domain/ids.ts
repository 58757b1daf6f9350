import { randomUUID } from 'node:crypto';
import { newId } from '@threadwork/platform';

/**
 * A claim id, for one take of a job: retries of the claim get the attempt a lost answer carried,
 * and later calls prove with it that this runner holds the run. A secret: never logged.
 */
export function newClaimId(): string {
  return newId('clm');
}

/** A sandbox's id, new for each sandbox a provider makes. */
export function newSandboxId(): string {
  return newId('sbx');
}

/** The Nats-Msg-Id of a `sandbox.status` event: each status said is news, never a retry of another. */
export function sandboxStatusMsgId(threadId: string): string {
  return `${threadId}:${randomUUID()}`;
}
