import { baseConfigShape } from '@threadwork/platform';
import { z } from 'zod';

/**
 * Only the shared settings: threads' behaviour has no knobs of its own yet (page sizes and limits
 * are part of the API contract, not of a deployment).
 */
export const ThreadsConfig = z.object({ ...baseConfigShape });
export type ThreadsConfig = z.output<typeof ThreadsConfig>;
