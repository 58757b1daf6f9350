import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The run's seed for the fault tests' jitter (support/random.ts). */
    chaosSeed: number;
  }
}

/** `CHAOS_SEED` as a 32-bit seed; undefined when unset. */
export function seedFromEnv(value = process.env.CHAOS_SEED): number | undefined {
  if (value === undefined || value === '') return undefined;
  const seed = Number(value);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new Error(`CHAOS_SEED must be an integer from 0 to ${0xffffffff}, not ${JSON.stringify(value)}`);
  }
  return seed;
}

/** Chooses the run's jitter seed once (CHAOS_SEED, or a fresh one) and prints it before any test. */
export default function setup(project: TestProject): void {
  const seed = seedFromEnv() ?? Math.floor(Math.random() * 2 ** 32);
  process.stdout.write(`fault tests: jitter seed ${seed} (replay with CHAOS_SEED=${seed})\n`);
  project.provide('chaosSeed', seed);
}
