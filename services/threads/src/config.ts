import { baseConfigShape } from '@threadwork/platform';
import { z } from 'zod';

export const ThreadsConfig = z.object({ ...baseConfigShape });
export type ThreadsConfig = z.output<typeof ThreadsConfig>;
