import { inject } from 'vitest';
import { seedFromEnv } from './seed-setup.js';

// The fault tests' jitter and backoff come from one seeded generator instead of Math.random(), so
// the timing that made an interleaving fail can be played again: the run's seed is printed when it
// starts (support/seed-setup.ts) and in a failing test's message, and `CHAOS_SEED=<seed>` replays it.
// Each test draws from a stream of its own (the seed mixed with the test's name), so a test run
// alone (`-t`) gets the same draws as in the whole file.

/** mulberry32: a tiny 32-bit generator; plenty for timing jitter, and the same on every machine. */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** FNV-1a of a name, to give each test a stream of its own under one seed. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The run's seed: chosen by the chaos config's global setup, else CHAOS_SEED, else a fresh one. */
export const chaosSeed: number =
  (inject('chaosSeed') as number | undefined) ?? seedFromEnv() ?? Math.floor(Math.random() * 2 ** 32);

let next = mulberry32(chaosSeed);

/** Draws for the test named `name` from here on (support/replay.ts calls it before each test). */
export function reseedFor(name: string): void {
  next = mulberry32(chaosSeed ^ hash(name));
}

/** A number in [0, 1), as Math.random(), from the seeded stream. */
export function random(): number {
  return next();
}

/** What replays this run's jitter, for a failing test's message. */
export const replayHint = `CHAOS_SEED=${chaosSeed} replays this run's jitter (CHAOS_SEED=${chaosSeed} npm run test:chaos -- <file>)`;
