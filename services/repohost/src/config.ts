import { baseConfigShape } from '@threadwork/platform';
import { z } from 'zod';

export const RepohostConfig = z.object({
  ...baseConfigShape,
  /** Folder of bare repositories (`*.git`) served by the `local` provider when no GitHub App is configured. */
  REPOHOST_LOCAL_DIR: z.string().min(1).optional(),
});
export type RepohostConfig = z.output<typeof RepohostConfig>;
