import { randomBytes, randomUUID } from 'node:crypto';

/**
 * A claim id, for one take of a job: retries of the claim get the attempt a lost answer carried,
 * and later calls prove with it that this runner holds the run. A secret: never logged.
 */
export function newClaimId(): string {
  return `clm_${randomBytes(16).toString('hex')}`;
}

/** The Nats-Msg-Id of a `sandbox.status` event: each status said is news, never a retry of another. */
export function sandboxStatusMsgId(threadId: string): string {
  return `${threadId}:${randomUUID()}`;
}
