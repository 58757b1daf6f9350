import { harnessCatalogIssues, harnessCatalogShape } from '@threadwork/contracts';
import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

export const ThreadsConfig = z
  .object({
    ...baseConfigShape,
    /**
     * The harness catalog (HARNESSES, DEFAULT_HARNESS, CODEX_MODEL, CODEX_MODELS, …; see
     * harness-catalog.ts in contracts), the same variables as the runs service's: a thread or task
     * asking for a harness not served, a model its harness does not take or a reasoning effort not
     * among its efforts is refused (400) before anything is written.
     */
    ...harnessCatalogShape,
    /**
     * How long a `client_request_id` stays bound to its request: a replay within this window gets
     * the first answer; after it the id is free again (24 hours, as Stripe keeps its keys).
     */
    IDEMPOTENCY_TTL_MS: env.duration(24 * 60 * 60_000),
    /**
     * How often expired idempotency records and messages of sends that never started a run are
     * removed. A record is honoured for exactly IDEMPOTENCY_TTL_MS either way; this bounds how long
     * an expired one takes up room.
     */
    SWEEP_INTERVAL_MS: env.duration(10 * 60_000),
    /**
     * Runs one user may have live at once (queued, starting, running, waiting for input or
     * cancelling), 0 for no limit. Creating a thread or task, sending a message or queueing on an
     * idle thread past it is refused with 409 `too_many_runs` before anything is written; a queued
     * follow-up whose turn comes while the user is at the limit stays pending until one of the
     * user's runs ends. Decided one request at a time per user within a replica, so with R threads
     * replicas a user's simultaneous admissions can pass it by at most R − 1.
     */
    MAX_LIVE_RUNS_PER_USER: z.coerce.number().int().min(0).max(1000).default(10),
    /**
     * Threads (and tasks) one user may create in any 60 s, 0 for no limit; past it 429
     * `rate_limited` with `Retry-After`. Counted from the threads stored, so every replica sees the
     * same count.
     */
    THREADS_PER_MINUTE_PER_USER: z.coerce.number().int().min(0).max(100_000).default(30),
  })
  .superRefine((config, ctx) => {
    for (const { path, message } of harnessCatalogIssues(config))
      ctx.addIssue({ code: 'custom', path: [path], message });
  });
export type ThreadsConfig = z.output<typeof ThreadsConfig>;
