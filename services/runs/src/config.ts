import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

export const RunsConfig = z.object({
  ...baseConfigShape,
  /** How long a run's events are kept in RUN_EVENTS (0 = until other limits apply). */
  RUN_EVENTS_MAX_AGE_MS: env.duration(30 * 24 * 60 * 60 * 1000),
});
export type RunsConfig = z.output<typeof RunsConfig>;
