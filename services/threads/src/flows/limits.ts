import { conflict, rateLimited, type AppError } from '@threadwork/platform';
import { THREAD_RATE_WINDOW_MS, threadRateRetryAfter } from '../domain/limits.js';
import type { ThreadRecord } from '../store/records.js';
import type { Deps } from './deps.js';

/**
 * Runs `admit` for a request after `check`, one fresh request of the owner at a time (see
 * SerialByKey); with both limits off, straight away. A request that replays a `client_request_id` already bound (`requestKey`) is
 * neither checked nor made to wait: it converges on what its first use admitted, and admits
 * nothing new — and a retry racing its own first attempt must not wait for it (or be refused
 * because of the run that attempt admitted).
 */
export async function withinLimits<T>(
  deps: Deps,
  ownerId: string,
  requestKey: string | null,
  check: () => Promise<void>,
  admit: () => Promise<T>,
): Promise<T> {
  if (deps.limits.liveRunsPerUser === 0 && deps.limits.threadsPerMinute === 0) return admit();
  const isReplay = async () => requestKey !== null && (await deps.store.hasRequest(requestKey));
  if (await isReplay()) return admit();
  return deps.serial.run(ownerId, async () => {
    // A twin may have bound the key while this one waited.
    if (!(await isReplay())) await check();
    return admit();
  });
}

export function tooManyRuns(max: number): AppError {
  return conflict(
    'too_many_runs',
    `at most ${max} runs may be live at once per user; wait for one to end (or cancel one) and retry`,
  );
}

/** Whether the owner may have one more live run now. */
export async function hasRoom(deps: Pick<Deps, 'peers' | 'limits'>, ownerId: string): Promise<boolean> {
  const max = deps.limits.liveRunsPerUser;
  if (max === 0) return true;
  return (await deps.peers.liveCount(ownerId, max)) < max;
}

/**
 * Refuses an admission past MAX_LIVE_RUNS_PER_USER with 409 `too_many_runs`. Sending to a thread
 * that is busy anyway says `thread_busy`, the more useful of the two (queue or steer instead).
 */
export async function checkLiveRuns(deps: Deps, ownerId: string, thread?: ThreadRecord): Promise<void> {
  if (await hasRoom(deps, ownerId)) return;
  if (thread && (await deps.peers.liveRun(ownerId, thread._id))) {
    throw conflict('thread_busy', 'the thread has an active run; queue or steer instead');
  }
  throw tooManyRuns(deps.limits.liveRunsPerUser);
}

/**
 * Refuses a creation past THREADS_PER_MINUTE_PER_USER with 429 `rate_limited`, saying when the
 * window has room again. A sliding window over the threads stored: every replica counts the same.
 */
export async function checkThreadRate(deps: Deps, ownerId: string): Promise<void> {
  const perMinute = deps.limits.threadsPerMinute;
  if (perMinute === 0) return;
  const now = Date.now();
  const since = new Date(now - THREAD_RATE_WINDOW_MS);
  const count = await deps.store.countThreadsSince(ownerId, since);
  if (count < perMinute) return;
  const oldestToLeave = await deps.store.threadCreatedSince(ownerId, since, count - perMinute);
  const seconds = threadRateRetryAfter(oldestToLeave, now);
  throw rateLimited(`at most ${perMinute} threads a minute per user; retry in ${seconds} s`, seconds);
}
