import { baseConfigShape } from '@threadwork/platform';
import { z } from 'zod';

export const RunnerConfig = z.object({
  ...baseConfigShape,
  /** Root folder of the local sandbox provider: one workspace per thread. */
  SANDBOX_ROOT: z.string().min(1).default('/tmp/threadwork-sandboxes'),
});
export type RunnerConfig = z.output<typeof RunnerConfig>;
