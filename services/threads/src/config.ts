import { harnessList } from '@threadwork/contracts';
import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

export const ThreadsConfig = z.object({
  ...baseConfigShape,
  /** The harnesses this deployment's runners serve: a thread asking for another is refused (400). */
  HARNESSES: harnessList,
  /**
   * How long a `client_request_id` stays bound to its request: a replay within this window gets
   * the first answer; after it the id is free again (24 hours, as Stripe keeps its keys).
   */
  IDEMPOTENCY_TTL_MS: env.duration(24 * 60 * 60_000),
  /**
   * How often expired idempotency records and messages of sends that never started a run are
   * removed. A record is honoured for exactly IDEMPOTENCY_TTL_MS either way; this bounds how long
   * an expired one takes up room.
   */
  SWEEP_INTERVAL_MS: env.duration(10 * 60_000),
});
export type ThreadsConfig = z.output<typeof ThreadsConfig>;
