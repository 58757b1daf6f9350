import { isAppError } from '@threadwork/platform';
import type { Deps } from './deps.js';
import { drainWaiting } from './queue.js';

/** Hidden messages looked at per sweep, at most (the rest wait for the next one). */
const HIDDEN_BATCH = 200;

/** Waiting threads looked at per sweep (their owners' waits are drained). */
const WAITS_BATCH = 200;

export interface SweepResult {
  requests: number;
  removed: number;
  shown: number;
  /** Runs admitted for threads that were waiting for room under the live-run limit. */
  admitted: number;
}

/**
 * Housekeeping, run by every replica on a timer; each step is idempotent, so replicas may overlap.
 *
 * Idempotency records past their window go (claims already treat them as absent). So do the
 * messages of sends that never started a run: a send stores its message hidden before asking runs
 * for the run, and one that lost the thread (`thread_busy`) or died before the answer leaves it
 * hidden. While the idempotency window lasts a retry of that send may still show it, so only
 * older ones are looked at: one whose run exists after all (the send died between admission and
 * showing) is shown; one a pending control will still admit stays; any other is removed.
 *
 * Threads waiting for room under the live-run limit are given it when a run of their owner ends;
 * should that moment have been missed (the process stopped while handling it), the sweep gives it.
 */
export async function sweep(deps: Deps, now: Date, idempotencyTtlMs: number): Promise<SweepResult> {
  const { store, peers, logger } = deps;
  const requests = await store.sweepRequests(now);
  let removed = 0;
  let shown = 0;
  const before = new Date(now.getTime() - idempotencyTtlMs);
  for (const message of await store.hiddenMessagesBefore(before, HIDDEN_BATCH)) {
    if (await store.hasPendingControlFor(message.thread_id, message.message_id)) continue;
    const thread = await store.getThread(message.thread_id);
    if (thread && message.run_id) {
      try {
        await peers.getRun(thread.owner_id, message.run_id);
        await store.showRunMessages(message.run_id);
        shown += 1;
        continue;
      } catch (err) {
        if (!isAppError(err) || err.code !== 'not_found') {
          // Runs could not say: ask again next time rather than remove what may belong to a run.
          logger.warn({ err, message: message._id }, 'sweep: could not look up the run of a hidden message');
          continue;
        }
      }
    }
    await store.deleteHiddenMessage(message._id);
    removed += 1;
  }
  let admitted = 0;
  if (deps.limits.liveRunsPerUser > 0) {
    const owners = new Set((await store.oldestWaits(WAITS_BATCH)).map((wait) => wait.owner_id));
    for (const owner of owners) admitted += await drainWaiting(deps, owner);
  }
  if (requests + removed + shown + admitted > 0) {
    logger.info(
      { requests, removed, shown, admitted },
      'swept expired idempotency records and unsent messages, and admitted waiting follow-ups',
    );
  }
  return { requests, removed, shown, admitted };
}
