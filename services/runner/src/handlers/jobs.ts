import { CONSUMERS, RunTicket, STREAM_NAMES } from '@threadwork/contracts';
import {
  awaitConsumer,
  backoffMs,
  describeZodError,
  extractTraceContext,
  retry,
  SpanKind,
  withSpan,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type Logger,
} from '@threadwork/platform';
import type { JobResult } from '../flows/run-state.js';

// RUN_JOBS → runs. A durable pull consumer per harness (`runner-<harness>`), shared by every
// runner of that harness: work-queue retention hands each job to one runner; the ack wait with
// in-progress acks (`working()`) is the heartbeat, so a runner that dies stops heartbeating and
// its job goes to another runner after the consumer's ack wait (the runs service's
// JOB_ACK_WAIT_MS, which also creates the consumer). A runner takes a job only when it has a
// free slot (RUNNER_CONCURRENCY, shared by the harnesses it serves), so waiting jobs stay in the
// stream for other runners.

export interface JobConsumerOptions {
  harness: string;
  /** The runner's run slots, shared by the consumers of every harness it serves. */
  slots: RunSlots;
  logger: Logger;
}

/** How many runs a runner works at once (RUNNER_CONCURRENCY), whichever harness they are for. */
export class RunSlots {
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly max: number) {}

  get full(): boolean {
    return this.running.size >= this.max;
  }

  /** Holds a slot until `job` settles. */
  hold(job: Promise<void>): void {
    this.running.add(job);
    void job.finally(() => this.running.delete(job));
  }

  /** Resolves when a slot may have come free (or `stopped` resolves). */
  freed(stopped: Promise<unknown>): Promise<unknown> {
    return Promise.race([...this.running, stopped]);
  }
}

export interface JobConsumer {
  /** Stops taking jobs and waits (up to `timeoutMs`) for those in progress to be answered. */
  stop(timeoutMs: number): Promise<void>;
}

export const consumerName = CONSUMERS.runner;

const PULL_EXPIRES_MS = 1_000;
/** A job that failed unexpectedly comes back later each time: 1 s doubling up to 30 s. */
const REDELIVERY_BACKOFF = { minDelayMs: 1_000, maxDelayMs: 30_000 };

export async function startJobConsumer(
  js: JetStreamClient,
  jsm: JetStreamManager,
  opts: JobConsumerOptions,
  handle: (ticket: RunTicket, msg: JsMsg) => Promise<JobResult>,
): Promise<JobConsumer> {
  const durable = consumerName(opts.harness);
  const info = await awaitConsumer(jsm, STREAM_NAMES.runJobs, durable, opts.logger);
  const ackWaitMs = Math.max(1, Math.floor((info.config.ack_wait ?? 30_000_000_000) / 1_000_000));
  const consumer = await js.consumers.get(STREAM_NAMES.runJobs, durable);
  const inflight = new Set<Promise<void>>();
  let stopping = false;
  // Stopping does not wait for a pull or a pause in progress: with NATS gone, a pull never ends.
  const stop = new AbortController();
  const stopped = new Promise<null>((resolve) => stop.signal.addEventListener('abort', () => resolve(null)));

  const work = (msg: JsMsg) =>
    withSpan(`consume ${msg.subject}`, { kind: SpanKind.CONSUMER, parent: extractTraceContext(msg.headers) }, () =>
      processJob(msg, { ...opts, ackWaitMs }, handle),
    ).catch((err: unknown) => opts.logger.error({ err }, 'job handling failed'));

  const loop = (async () => {
    while (!stopping) {
      if (opts.slots.full) {
        await opts.slots.freed(stopped);
        continue;
      }
      let pull: Promise<JsMsg | null> | undefined;
      let msg: JsMsg | null;
      try {
        msg = await retry(
          () => {
            pull = consumer.next({ expires: PULL_EXPIRES_MS });
            return Promise.race([pull, stopped]);
          },
          {
            minDelayMs: 1_000,
            maxDelayMs: 1_000,
            shouldRetry: () => !stopping,
            signal: stop.signal,
            onRetry: (err) => opts.logger.warn({ err }, 'pulling a job failed; trying again'),
          },
        );
      } catch {
        // A failed pull ends the retries only once stopping.
        break;
      }
      if (stopping) {
        // Pulled while stopping, now or later: straight back to the stream for another runner.
        void pull?.then(
          (late) => late?.nak(),
          () => {},
        );
        break;
      }
      if (!msg) continue;
      const job = work(msg);
      inflight.add(job);
      opts.slots.hold(job);
      void job.finally(() => inflight.delete(job));
    }
  })();

  return {
    async stop(timeoutMs) {
      stopping = true;
      stop.abort();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([loop, ...inflight]),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, timeoutMs);
        }),
      ]);
      clearTimeout(timer);
    },
  };
}

async function processJob(
  msg: JsMsg,
  opts: JobConsumerOptions & { ackWaitMs: number },
  handle: (ticket: RunTicket, msg: JsMsg) => Promise<JobResult>,
): Promise<void> {
  let payload: unknown;
  try {
    payload = msg.json();
  } catch {
    msg.term('not JSON');
    return;
  }
  // A job published whole (before tickets) still parses: its ids are all that is read of it.
  const parsed = RunTicket.safeParse(payload);
  if (!parsed.success) {
    opts.logger.error({ subject: msg.subject, issue: describeZodError(parsed.error) }, 'invalid job dropped');
    msg.term(describeZodError(parsed.error));
    return;
  }
  // Heartbeat well inside the ack wait, so a slow run is never taken for a dead runner.
  const heartbeat = setInterval(() => msg.working(), Math.max(250, Math.floor(opts.ackWaitMs / 3)));
  let result: JobResult;
  try {
    result = await handle(parsed.data, msg);
  } catch (err) {
    opts.logger.error({ err, run_id: parsed.data.run_id }, 'job failed; handing it back');
    result = { kind: 'nak', delayMs: backoffMs(msg.info.deliveryCount, REDELIVERY_BACKOFF) };
  } finally {
    clearInterval(heartbeat);
  }
  switch (result.kind) {
    case 'ack':
      msg.ack();
      return;
    case 'nak':
      msg.nak(result.delayMs > 0 ? result.delayMs : undefined);
      return;
    case 'abandon':
      // A newer attempt holds the run (and this job's redelivery): acking here could remove it under them.
      return;
  }
}
