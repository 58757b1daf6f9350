import { randomBytes } from 'node:crypto';
import { newId } from '@threadwork/platform';
import { inject } from 'vitest';

/** The servers the global setup started (or was given) for this test run. */
export function testInfra() {
  return {
    natsUrl: inject('natsUrl'),
    mongoUrl: inject('mongoUrl'),
    infra: inject('infra'),
    natsServerBin: inject('natsServerBin'),
    ferretdbBin: inject('ferretdbBin'),
  };
}

/** A short unique token: tests isolate by unique ids and database names, so they run in parallel. */
export function uniqueId(prefix = 't'): string {
  return `${prefix}${Date.now().toString(36)}${randomBytes(4).toString('hex')}`;
}

/** A claim id as a runner makes one for each take of a job: random, and its proof of holding the run. */
export function newClaimId(): string {
  return newId('clm');
}

/** A MONGO_DB_PREFIX of its own for one test file or service instance. */
export function uniqueDbPrefix(): string {
  return uniqueId('tw');
}
