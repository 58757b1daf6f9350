import { join, resolve } from 'node:path';
import { baseConfigShape } from '@threadwork/platform';
import { z } from 'zod';

export const RepohostConfig = z.object({
  ...baseConfigShape,
  /**
   * Folder of bare repositories (`*.git`) served by the `local` provider when no GitHub App is
   * configured; `<THREADWORK_DATA_DIR>/repos` when unset. Created at start if missing.
   */
  REPOHOST_LOCAL_DIR: z.string().min(1).optional(),
  /** Data folder of the local stack (default `./.data`); only used to place the default REPOHOST_LOCAL_DIR. */
  THREADWORK_DATA_DIR: z.string().min(1).optional(),
});
export type RepohostConfig = z.output<typeof RepohostConfig>;

/** Where the `local` provider looks for bare repositories, as an absolute path (it ends up in clone URLs). */
export function localRepositoriesDir(
  config: Pick<RepohostConfig, 'REPOHOST_LOCAL_DIR' | 'THREADWORK_DATA_DIR'>,
): string {
  return resolve(config.REPOHOST_LOCAL_DIR ?? join(config.THREADWORK_DATA_DIR ?? '.data', 'repos'));
}
