import { rpc, type RunEventChunk } from '@threadwork/contracts';
import { isAppError, request, type Logger, type NatsConnection } from '@threadwork/platform';
import { boundEvent } from '../domain/event-bound.js';

// A run's events on their way to the runs service: batched (a flush every FLUSH_MS or BATCH_MAX
// events), sent one batch at a time so they keep their order, each keyed `${attempt}:${n}` so a
// retried batch is stored once. A refused append (`already_settled`: the run ended or a newer
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
  private sending: Promise<void> = Promise.resolve();
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
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  /** Resolves once everything pushed so far is stored (or the sink was closed). */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.queue.length > 0) {
      const batch = this.takeBatch();
      this.sending = this.sending.then(() => this.send(batch));
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
    const deadline = Date.now() + RETRY_FOR_MS;
    for (let attempt = 0; !this.closed; attempt++) {
      try {
        await request(this.nc, rpc.runs.append, {
          run_id: this.runId,
          attempt: this.attempt,
          claim_id: this.claimId,
          events: batch.map(({ key, chunk }) => ({ key, chunk: chunk as never })),
        });
        return;
      } catch (err) {
        if (isAppError(err) && err.code === 'already_settled') {
          this.close(err.message);
          return;
        }
        const retryable = isAppError(err) && err.retryable;
        if (!retryable || Date.now() > deadline) {
          // Dropping a batch beats wedging the run; the run's own outcome still arrives by transition.
          this.logger.error({ err, run_id: this.runId, events: batch.length }, 'run events could not be appended');
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** attempt)));
      }
    }
  }

  private close(reason: string): void {
    if (this.closed) return;
    this.closedReason = reason;
    this.queue = [];
    if (this.timer) clearTimeout(this.timer);
    this.onRefused(reason);
  }
}
