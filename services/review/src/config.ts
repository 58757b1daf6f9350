import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

export const ReviewConfig = z.object({
  ...baseConfigShape,
  /**
   * How long review waits for threads, runs and repohost while answering; below the gateway's
   * REQUEST_TIMEOUT_MS so a slow peer becomes review's own 503 rather than the gateway's.
   */
  PEER_TIMEOUT_MS: env.duration(4_000),
});
export type ReviewConfig = z.output<typeof ReviewConfig>;
