import { rpc, type RunEventChunk } from '@threadwork/contracts';
import { isAppError, request, retry, type Logger, type NatsConnection } from '@threadwork/platform';
import { boundEvent } from '../domain/event-bound.js';

// A run's events on their way to the runs service: sent one batch at a time so they keep their
// order, each keyed `${attempt}:${n}` so a retried batch is stored once. An event pushed while no
// batch is on its way goes at once (with whatever else the same tick pushed); those pushed while one
// is go together when it is stored, or after FLUSH_MS or at BATCH_MAX events: batches grow with the
// rate and the round trip, and a lone event (the first of a turn, say) does not wait for company. A refused append (`already_settled`: the run ended or a newer
// attempt took it over) closes the sink and tells the owner, who must stop working the run.

const FLUSH_MS = 50;
const BATCH_MAX = 100;
/** One append request must fit a NATS message (1 MiB by default) with room to spare. */
const BATCH_MAX_BYTES = 256 * 1024;
const RETRY_FOR_MS = 60_000;

type Entry = { key: string; chunk: Record<string, unknown>; size: number };

export class EventSink {
  private queue: Entry[] = [];
  private n = 0;
  private timer: NodeJS.Timeout | undefined;
  private soon: NodeJS.Immediate | undefined;
  private sending: Promise<void> = Promise.resolve();
  /** Batches handed to `send` and not yet stored (or given up). */
  private inFlight = 0;
  private closedReason: string | null = null;

  constructor(
    private readonly nc: NatsConnection,
    private readonly runId: string,
    private readonly attempt: number,
    /** The claim's secret: with the attempt, what the runs service fences appends by. */
    private readonly claimId: string,
    private readonly logger: Logger,
    private readonly onRefused: (reason: string) => void,
  ) {}

  get closed(): boolean {
    return this.closedReason !== null;
  }

  push(chunk: RunEventChunk): void {
    if (this.closed) return;
    // Bounded whole, nested values included (domain/event-bound.ts): much of an event is the agent's.
    const shrunk = boundEvent(chunk as Record<string, unknown>);
    this.queue.push({ key: `${this.attempt}:${++this.n}`, chunk: shrunk.chunk, size: shrunk.size });
    if (this.queue.length >= BATCH_MAX) void this.flush();
    else if (this.inFlight === 0) this.soon ??= setImmediate(() => void this.flush());
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  /** Resolves once everything pushed so far is stored (or the sink was closed). */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    if (this.soon) clearImmediate(this.soon);
    this.timer = undefined;
    this.soon = undefined;
    while (this.queue.length > 0) {
      const batch = this.takeBatch();
      this.inFlight++;
      this.sending = this.sending
        .then(() => this.send(batch))
        .finally(() => {
          // What came meanwhile goes now, the batch before it stored.
          if (--this.inFlight === 0 && this.queue.length > 0) void this.flush();
        });
    }
    return this.sending;
  }

  private takeBatch(): Entry[] {
    const batch: Entry[] = [];
    let bytes = 0;
    while (this.queue.length > 0 && batch.length < BATCH_MAX) {
      const next = this.queue[0] as Entry;
      if (batch.length > 0 && bytes + next.size > BATCH_MAX_BYTES) break;
      batch.push(next);
      bytes += next.size;
      this.queue.shift();
    }
    return batch;
  }

  private async send(batch: Entry[]): Promise<void> {
    if (this.closed) return;
    try {
      await retry(
        () =>
          request(this.nc, rpc.runs.append, {
            run_id: this.runId,
            attempt: this.attempt,
            claim_id: this.claimId,
            events: batch.map(({ key, chunk }) => ({ key, chunk: chunk as never })),
          }),
        { untilMs: RETRY_FOR_MS, minDelayMs: 100, maxDelayMs: 2_000 },
      );
    } catch (err) {
      if (isAppError(err) && err.code === 'already_settled') {
        this.close(err.message);
        return;
      }
      // Dropping a batch beats wedging the run; the run's own outcome still arrives by transition.
      this.logger.error({ err, run_id: this.runId, events: batch.length }, 'run events could not be appended');
    }
  }

  private close(reason: string): void {
    if (this.closed) return;
    this.closedReason = reason;
    this.queue = [];
    if (this.timer) clearTimeout(this.timer);
    if (this.soon) clearImmediate(this.soon);
    this.onRefused(reason);
  }
}
