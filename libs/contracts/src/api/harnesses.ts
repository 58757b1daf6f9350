import { z } from 'zod';
import { Id } from '../common.js';
import { CollaborationMode } from '../values.js';

/**
 * One harness this deployment serves, with what a thread may ask of it: a `model` from `models`
 * (any model when the list is empty) and a `reasoning_effort` from `reasoning_efforts`. A thread
 * that names neither gets the defaults.
 */
export const Harness = z
  .object({
    id: Id.describe('What `harness` of a new thread or task names.'),
    default: z.boolean().describe('Whether a thread or task that names no harness gets this one.'),
    default_model: Id.describe('The model of a thread or task on this harness that names none.'),
    models: z.array(Id).describe('The models a thread or task on this harness may name; empty: any model is accepted.'),
    reasoning_efforts: z.array(Id).min(1).describe('The reasoning efforts a thread or task on this harness may name.'),
    default_reasoning_effort: Id.describe('The reasoning effort of a thread or task on this harness that names none.'),
    collaboration_modes: z.array(CollaborationMode).describe('The collaboration modes this harness runs in.'),
  })
  .describe('A harness this deployment serves, with the models and reasoning efforts it takes.');
export type Harness = z.infer<typeof Harness>;

/** GET /v1/harnesses */
export const HarnessList = z
  .object({ harnesses: z.array(Harness) })
  .describe('The harnesses this deployment serves, in the order it names them.');
export type HarnessList = z.infer<typeof HarnessList>;
