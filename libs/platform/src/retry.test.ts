import { describe, expect, it } from 'vitest';
import { AppError, unavailable } from './errors.js';
import { backoffMs, retry } from './retry.js';

const quick = { minDelayMs: 1, maxDelayMs: 4 };

/** A call that fails with each of `errors` in turn, then answers `value`. */
function failing<T>(errors: unknown[], value: T) {
  const calls: number[] = [];
  const fn = async (attempt: number) => {
    calls.push(attempt);
    const err = errors[calls.length - 1];
    if (err !== undefined) throw err;
    return value;
  };
  return { fn, calls };
}

describe('backoffMs', () => {
  it('doubles from the minimum up to the maximum', () => {
    const delays = [0, 1, 2, 3, 4, 5, 6, 7].map((n) => backoffMs(n, { minDelayMs: 500, maxDelayMs: 30_000 }));
    expect(delays).toEqual([500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
  });

  it('stays finite however many attempts failed', () => {
    expect(backoffMs(10_000, { minDelayMs: 100, maxDelayMs: 2_000 })).toBe(2_000);
  });

  it('with full jitter waits somewhere between nothing and the computed delay', () => {
    for (let i = 0; i < 200; i++) {
      // A computed delay, not a measured time: 100 ms doubled three times is the ceiling.
      const delay = backoffMs(3, { minDelayMs: 100, maxDelayMs: 2_000, jitter: true });
      expect(delay).toBeGreaterThanOrEqual(0);
      expect(delay).toBeLessThan(800);
    }
  });
});

describe('retry', () => {
  it('answers what the first try answers', async () => {
    const { fn, calls } = failing([], 'ok');
    expect(await retry(fn, quick)).toBe('ok');
    expect(calls).toEqual([0]);
  });

  it('tries again after retryable failures, with doubling delays up to the maximum', async () => {
    const { fn, calls } = failing([unavailable('a'), unavailable('b'), unavailable('c'), unavailable('d')], 'ok');
    const delays: number[] = [];
    expect(await retry(fn, { ...quick, onRetry: (_err, { delayMs }) => delays.push(delayMs) })).toBe('ok');
    expect(calls).toEqual([0, 1, 2, 3, 4]);
    expect(delays).toEqual([1, 2, 4, 4]);
  });

  it('throws a failure that is not retryable at once', async () => {
    const refused = new AppError('not_found', 'gone');
    const { fn, calls } = failing([refused], 'ok');
    await expect(retry(fn, quick)).rejects.toBe(refused);
    expect(calls).toEqual([0]);
  });

  it('does not retry an error that is not an AppError unless told to', async () => {
    const plain = new Error('boom');
    await expect(retry(failing([plain], 'ok').fn, quick)).rejects.toBe(plain);
    const told = failing([plain], 'ok');
    expect(await retry(told.fn, { ...quick, shouldRetry: () => true })).toBe('ok');
    expect(told.calls).toEqual([0, 1]);
  });

  it('throws the last failure once the retries are spent', async () => {
    const last = unavailable('third');
    const { fn, calls } = failing([unavailable('first'), unavailable('second'), last], 'ok');
    await expect(retry(fn, { ...quick, retries: 2 })).rejects.toBe(last);
    expect(calls).toEqual([0, 1, 2]);
  });

  it('does not retry past its time bound', async () => {
    const first = unavailable('first');
    const { fn, calls } = failing([first], 'ok');
    await expect(retry(fn, { ...quick, untilMs: -1 })).rejects.toBe(first);
    expect(calls).toEqual([0]);
  });

  it('retries within its time bound', async () => {
    const { fn, calls } = failing([unavailable('first')], 'ok');
    expect(await retry(fn, { ...quick, untilMs: 600_000 })).toBe('ok');
    expect(calls).toEqual([0, 1]);
  });

  it('waits as long as an error says to', async () => {
    const held = new AppError('unavailable', 'held', { details: { retry_after_ms: 3 } });
    const delays: number[] = [];
    const { fn } = failing([held], 'ok');
    expect(await retry(fn, { ...quick, onRetry: (_err, { delayMs }) => delays.push(delayMs) })).toBe('ok');
    expect(delays).toEqual([3]);
  });

  it('stops a pending delay when its signal is aborted, with the signal’s reason', async () => {
    const stop = new AbortController();
    const reason = new Error('stopping');
    const { fn, calls } = failing([unavailable('first')], 'ok');
    const retried = retry(fn, {
      minDelayMs: 600_000,
      maxDelayMs: 600_000,
      signal: stop.signal,
      onRetry: () => stop.abort(reason),
    });
    await expect(retried).rejects.toBe(reason);
    expect(calls).toEqual([0]);
  });

  it('does not try at all once aborted', async () => {
    const stop = new AbortController();
    stop.abort(new Error('stopped'));
    const { fn, calls } = failing([], 'ok');
    await expect(retry(fn, { ...quick, signal: stop.signal })).rejects.toThrow('stopped');
    expect(calls).toEqual([]);
  });
});
