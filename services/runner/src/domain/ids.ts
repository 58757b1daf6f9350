import { randomBytes } from 'node:crypto';

/**
 * A claim id, for one take of a job: retries of the claim get the attempt a lost answer carried,
 * and later calls prove with it that this runner holds the run. A secret: never logged.
 */
export function newClaimId(): string {
  return `clm_${randomBytes(16).toString('hex')}`;
}
