import { hostname } from 'node:os';
import { Id } from '@threadwork/contracts';
import { baseConfigShape, env } from '@threadwork/platform';
import { z } from 'zod';

const MIB = 1024 * 1024;

export const RunnerConfig = z.object({
  ...baseConfigShape,
  /** Root folder of the local sandbox provider: one workspace per thread. Created if missing. */
  SANDBOX_ROOT: z.string().min(1).default('/tmp/threadwork-sandboxes'),
  /** Who claims runs (stored on the run's attempt); one per runner process. */
  RUNNER_ID: Id.default(`${hostname()}-${process.pid}`),
  /** Runs this runner works at once; each live one holds an agent process. */
  RUNNER_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(2),
  /** OpenAI-compatible Responses endpoint the agent talks to, e.g. `http://127.0.0.1:PORT/v1`. */
  MODEL_BASE_URL: z.string().url().optional(),
  /** Key for MODEL_BASE_URL; handed to the agent process only, never logged or written. */
  MODEL_API_KEY: z.string().min(1).optional(),
  /**
   * Wall-clock bound of one run, time spent waiting for the user's answer included; past it the
   * turn is interrupted (then killed) and the run fails `harness_timeout`.
   */
  RUN_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(1_000)
    .default(30 * 60_000),
  /** Output of one command forwarded as events; the rest is dropped with a note. */
  HARNESS_OUTPUT_CAP_BYTES: z.coerce.number().int().min(1024).default(MIB),
  /** Bound of the diff a candidate revision carries (cut at a line boundary, `truncated`). */
  DIFF_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(256 * 1024),
  /** An agent process whose sandbox had no run for this long is stopped (the workspace stays). */
  SANDBOX_IDLE_MS: env.duration(10 * 60_000),
  /** RUN_JOBS ack wait: a job not heartbeaten for this long goes to another runner. */
  JOB_ACK_WAIT_MS: z.coerce.number().int().min(1_000).default(30_000),
  /**
   * Deliveries of one job before JetStream gives up on it. Must exceed the runs service's
   * RUN_MAX_ATTEMPTS, so that the claim past the last attempt (which fails the run `runner_lost`)
   * still happens and no run is left live.
   */
  JOB_MAX_DELIVER: z.coerce.number().int().min(2).default(10),
  /** How often a live run's state is read back, for a cancel or an answer whose signal was missed. */
  RUN_POLL_MS: z.coerce.number().int().min(100).default(2_000),
  /** Scripted demo model in-process instead of MODEL_BASE_URL (no keys needed; replies are scripted). */
  THREADWORK_DEMO: env.bool(false),
  /** Codex's sandbox: `workspace-write` where bubblewrap works, else `danger-full-access` inside an outer sandbox. */
  CODEX_SANDBOX_MODE: z.enum(['danger-full-access', 'workspace-write']).default('danger-full-access'),
  /** Keep each harness-native notification under `raw` in the run events (for debugging adapters). */
  EVENTS_INCLUDE_RAW: env.bool(false),
});
export type RunnerConfig = z.output<typeof RunnerConfig>;
