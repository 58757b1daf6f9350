import { unavailable } from '@threadwork/platform';

// Per-user limits, decided without I/O: the order a user's admissions are decided in, how many
// items a page can hold, and when a refused creation may be tried again.

/**
 * Runs one task at a time per key (a user), in the order they arrive; different keys do not wait
 * for each other. A count-then-admit decision made under it cannot be raced by the same user's
 * other requests on this replica, which the database cannot promise on FerretDB (no transactions,
 * no atomic conditional updates).
 *
 * A task waits at most `waitMs` for its turn, then fails `unavailable` (retry): a turn held long
 * (a backing service not answering) must not pile the user's later requests up behind it past
 * the time anyone waits for their answers.
 */
export class SerialByKey {
  private readonly tails = new Map<string, Promise<void>>();

  constructor(private readonly waitMs: number) {}

  async run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    // Whoever comes next waits for this turn; one given up ends as soon as the turn before it.
    const tail = previous.then(() => finished);
    this.tails.set(key, tail);
    let timer: NodeJS.Timeout | undefined;
    try {
      const turn = await Promise.race([
        previous.then(() => true),
        new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), this.waitMs))),
      ]);
      if (!turn) throw unavailable('too many requests of this user at once; retry');
      return await task();
    } finally {
      clearTimeout(timer);
      done();
      // The last in line leaves nothing behind, so idle users cost no memory.
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }

  /** Keys with a task running or waiting (for tests). */
  get size(): number {
    return this.tails.size;
  }
}

/**
 * How many of `items` a page takes: in order, at most `limit`, and no more than fit in
 * `budgetBytes` — but always the first, so a page makes progress (one item is far smaller than
 * any budget). `sizeOf` is asked in order and may depend on what was taken before.
 */
export function fitPage<T>(
  items: readonly T[],
  limit: number,
  budgetBytes: number,
  sizeOf: (item: T) => number,
): number {
  let bytes = 0;
  let taken = 0;
  for (const item of items) {
    if (taken >= limit) break;
    const size = sizeOf(item);
    if (taken > 0 && bytes + size > budgetBytes) break;
    bytes += size;
    taken += 1;
  }
  return taken;
}

export const THREAD_RATE_WINDOW_MS = 60_000;

/**
 * Seconds until a full window has room again: until `oldestToLeave` — the creation whose leaving
 * the window brings the count below the limit — is a window old. At least 1.
 */
export function threadRateRetryAfter(oldestToLeave: Date | null, nowMs: number): number {
  if (!oldestToLeave) return 1;
  return Math.max(1, Math.ceil((oldestToLeave.getTime() + THREAD_RATE_WINDOW_MS - nowMs) / 1000));
}
