import { baseConfigShape } from '@threadwork/platform';
import { z } from 'zod';

export const ReviewConfig = z.object({ ...baseConfigShape });
export type ReviewConfig = z.output<typeof ReviewConfig>;
