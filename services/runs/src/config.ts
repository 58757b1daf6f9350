import { harnessCatalogIssues, harnessCatalogShape, runEventShardCount } from '@threadwork/contracts';
import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

export const RunsConfig = z
  .object({
    ...baseConfigShape,
    /** How long a run's events are kept in RUN_EVENTS (0 = until other limits apply). */
    RUN_EVENTS_MAX_AGE_MS: env.duration(30 * 24 * 60 * 60 * 1000),
    /**
     * How many JetStream streams hold the run event log, a run's stream chosen by a hash of its id
     * (1..32; 1: the single stream RUN_EVENTS). Fixed at install: a service started with another
     * count than the streams in place refuses to start, since every existing log would be looked
     * for in the wrong stream. Many runs read at random are served faster from several streams.
     */
    RUN_EVENT_SHARDS: runEventShardCount.default(1),
    /**
     * How long after a run ended its events stay in the stream: then they are copied to MongoDB,
     * checked, and purged from the stream, which keeps the streams' live subjects (memory, index,
     * restart time) bounded by recent runs. Pages of an archived run are served from MongoDB with
     * the same sequences. 0: never archive.
     */
    RUN_EVENTS_ARCHIVE_AFTER_MS: env.duration(6 * 60 * 60_000),
    /**
     * The harness catalog (HARNESSES, DEFAULT_HARNESS, CODEX_MODEL, CODEX_MODELS, …; see
     * harness-catalog.ts in contracts): a run for a harness not served is refused, and a run that
     * names no model or reasoning effort gets its harness's defaults. DEFAULT_HARNESS is also the
     * RUN_JOBS subject a run naming no harness goes to. Threads reads the same variables.
     */
    ...harnessCatalogShape,
    /**
     * How many runners may claim one run (the first claim included). A job redelivered after the
     * last one fails the run with `runner_lost` instead of being tried again.
     */
    RUN_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(3),
    /**
     * An admission writes the thread's slot before the run; if it dies in between, the slot names a
     * run that does not exist. Another admission frees such a slot once it is this old, so a crash
     * cannot leave a thread busy forever. Far longer than any admission takes.
     */
    ORPHAN_SLOT_AFTER_MS: env.duration(60_000),
    /**
     * How long a run may wait for a runner to claim it: past it the run fails `no_runner` and its
     * thread is free again (no runner serves its harness, or none had room for that long). 0: forever.
     */
    RUN_QUEUE_MAX_AGE_MS: env.duration(60 * 60_000),
    /**
     * RUN_JOBS ack wait: a job its runner has not heartbeaten for this long goes to another runner
     * (runners heartbeat at a third of it, read from their consumer).
     */
    JOB_ACK_WAIT_MS: z.coerce.number().int().min(1_000).default(30_000),
    /**
     * A runner's lease on the run it holds: while its holder was heard from (claim, moves, appends,
     * its polls) within this long, no other claim may take the run over — a runner key alone cannot
     * steal a live run; a redelivered job is handed back until the lease has run out. Unset: the
     * ack wait. Never shorter than JOB_ACK_WAIT_MS (a runner JetStream still counts as alive keeps
     * its run), and it must stay well above the runners' RUN_POLL_MS, which renews it.
     */
    RUN_LEASE_MS: z.coerce.number().int().min(1_000).optional(),
    /**
     * Deliveries of one job before JetStream gives up on it; -1 (the default) for no limit. What
     * bounds a job that keeps losing its runner is RUN_MAX_ATTEMPTS: each lost runner costs one
     * attempt (one delivery), and the claim past the last attempt fails the run `runner_lost` and
     * acks the job. Deliveries that claim nothing cost no attempt but count here too — this service
     * unreachable for a while, a hand-back with a nak, a claim refused while the run's holder still
     * holds its lease (RUN_LEASE_MS; naked for as long) — and a job JetStream gives up on leaves its
     * run live with nobody to work it, its thread busy for good. A limit must therefore leave room
     * for RUN_MAX_ATTEMPTS + 1 deliveries and every such retry on top.
     */
    JOB_MAX_DELIVER: z.coerce
      .number()
      .int()
      .refine((n) => n === -1 || n >= 2, 'must be -1 (no limit) or at least 2')
      .default(-1),
  })
  .superRefine((config, ctx) => {
    for (const { path, message } of harnessCatalogIssues(config))
      ctx.addIssue({ code: 'custom', path: [path], message });
    if (config.RUN_LEASE_MS !== undefined && config.RUN_LEASE_MS < config.JOB_ACK_WAIT_MS) {
      ctx.addIssue({ code: 'custom', path: ['RUN_LEASE_MS'], message: 'must not be shorter than JOB_ACK_WAIT_MS' });
    }
  });
export type RunsConfig = z.output<typeof RunsConfig>;

/** How long a holder's lease on its run lasts after it was last heard from. */
export const leaseMs = (config: RunsConfig): number => config.RUN_LEASE_MS ?? config.JOB_ACK_WAIT_MS;
