import { describe, expect, it } from 'vitest';
import { TokenBuckets } from './rate-limit.js';

describe('TokenBuckets', () => {
  it('allows a burst, then one request per refilled token', () => {
    const buckets = new TokenBuckets({ perSecond: 2, burst: 3 });
    const t = 1_000_000;
    expect([1, 2, 3].map(() => buckets.take('a', t).allowed)).toEqual([true, true, true]);
    expect(buckets.take('a', t)).toEqual({ allowed: false, retryAfterSeconds: 1 });
    // Two tokens a second: one is back after 500 ms.
    expect(buckets.take('a', t + 499).allowed).toBe(false);
    expect(buckets.take('a', t + 500).allowed).toBe(true);
    expect(buckets.take('a', t + 500).allowed).toBe(false);
  });

  it('says how long until the next token, in whole seconds', () => {
    const buckets = new TokenBuckets({ perSecond: 0.2, burst: 1 });
    expect(buckets.take('a', 0).allowed).toBe(true);
    expect(buckets.take('a', 0)).toEqual({ allowed: false, retryAfterSeconds: 5 });
    expect(buckets.take('a', 2_500)).toEqual({ allowed: false, retryAfterSeconds: 3 });
  });

  it('keeps callers apart and never refills above the burst', () => {
    const buckets = new TokenBuckets({ perSecond: 1, burst: 2 });
    expect(buckets.take('a', 0).allowed).toBe(true);
    expect(buckets.take('a', 0).allowed).toBe(true);
    expect(buckets.take('a', 0).allowed).toBe(false);
    expect(buckets.take('b', 0).allowed).toBe(true);
    // An hour idle is still only `burst` requests at once.
    const later = 3_600_000;
    expect([1, 2, 3].map(() => buckets.take('a', later).allowed)).toEqual([true, true, false]);
  });

  it('forgets full buckets when many callers have come and gone', () => {
    const buckets = new TokenBuckets({ perSecond: 1, burst: 1 });
    for (let i = 0; i < 10_000; i++) buckets.take(`k${i}`, 0);
    expect(buckets.size).toBe(10_000);
    buckets.take('newcomer', 10_000);
    expect(buckets.size).toBe(1);
  });

  it('rejects a limit that would never allow anything', () => {
    expect(() => new TokenBuckets({ perSecond: 0, burst: 1 })).toThrow(RangeError);
    expect(() => new TokenBuckets({ perSecond: 1, burst: 0 })).toThrow(RangeError);
  });
});

describe('TokenBuckets.refund', () => {
  it('gives a taken token back, never above the burst', () => {
    const buckets = new TokenBuckets({ perSecond: 1, burst: 2 });
    expect(buckets.take('a', 0).allowed).toBe(true);
    expect(buckets.take('a', 0).allowed).toBe(true);
    buckets.refund('a', 0);
    expect(buckets.take('a', 0).allowed).toBe(true);
    expect(buckets.take('a', 0).allowed).toBe(false);
    buckets.refund('a', 0);
    buckets.refund('a', 0);
    buckets.refund('a', 0);
    expect([1, 2, 3].map(() => buckets.take('a', 0).allowed)).toEqual([true, true, false]);
    // Nothing to give back to a caller never seen.
    buckets.refund('b', 0);
    expect(buckets.size).toBe(1);
  });
});
