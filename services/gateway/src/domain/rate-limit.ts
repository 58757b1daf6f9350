// A token bucket per caller, in this process's memory: each replica limits on its own, so the
// effective limit behind a balancer is the per-replica one times the number of replicas. That is
// the trade we make for needing no shared store on every request.

export interface RateLimit {
  /** Tokens added per second. */
  perSecond: number;
  /** Bucket size: requests allowed at once. */
  burst: number;
}

export type Decision = { allowed: true } | { allowed: false; retryAfterSeconds: number };

interface Bucket {
  tokens: number;
  updatedMs: number;
}

/** Beyond this many callers, buckets that have refilled completely are forgotten. */
const SWEEP_ABOVE = 10_000;

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly limit: RateLimit) {
    if (!(limit.perSecond > 0) || !(limit.burst >= 1))
      throw new RangeError('rate limit needs perSecond > 0, burst >= 1');
  }

  /** Takes one token for `key`, or says how long until one is there. */
  take(key: string, nowMs: number): Decision {
    const bucket = this.refilled(key, nowMs);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true };
    }
    const waitSeconds = (1 - bucket.tokens) / this.limit.perSecond;
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil(waitSeconds)) };
  }

  /**
   * Gives back a token taken for `key` (up to the bucket's size): for limits on what fails, where
   * a token is taken before the attempt, so that concurrent attempts cannot overrun the limit,
   * and given back when it did not fail.
   */
  refund(key: string, nowMs: number): void {
    const bucket = this.buckets.get(key);
    if (!bucket) return;
    const refilled = this.refilled(key, nowMs);
    refilled.tokens = Math.min(this.limit.burst, refilled.tokens + 1);
  }

  /** Whether `key` has a token now, without taking it; else how long until one is there. */
  peek(key: string, nowMs: number): Decision {
    const bucket = this.buckets.get(key);
    if (!bucket) return { allowed: true };
    const elapsedSeconds = Math.max(0, nowMs - bucket.updatedMs) / 1000;
    const tokens = Math.min(this.limit.burst, bucket.tokens + elapsedSeconds * this.limit.perSecond);
    if (tokens >= 1) return { allowed: true };
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / this.limit.perSecond)) };
  }

  /**
   * Takes a token for `key` whether or not one is there: for what has already happened (a failure
   * counted after the fact). The bucket may go below zero, down to `-floor`, so failures beyond the
   * limit lengthen the wait rather than being forgotten.
   */
  charge(key: string, nowMs: number, floor: number): void {
    const bucket = this.refilled(key, nowMs);
    bucket.tokens = Math.max(-floor, bucket.tokens - 1);
  }

  get size(): number {
    return this.buckets.size;
  }

  private refilled(key: string, nowMs: number): Bucket {
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= SWEEP_ABOVE) this.sweep(nowMs);
      bucket = { tokens: this.limit.burst, updatedMs: nowMs };
      this.buckets.set(key, bucket);
      return bucket;
    }
    const elapsedSeconds = Math.max(0, nowMs - bucket.updatedMs) / 1000;
    bucket.tokens = Math.min(this.limit.burst, bucket.tokens + elapsedSeconds * this.limit.perSecond);
    bucket.updatedMs = nowMs;
    return bucket;
  }

  /** A full bucket is the same as no bucket, so dropping it changes no decision. */
  private sweep(nowMs: number): void {
    for (const [key, bucket] of this.buckets) {
      const elapsedSeconds = Math.max(0, nowMs - bucket.updatedMs) / 1000;
      if (bucket.tokens + elapsedSeconds * this.limit.perSecond >= this.limit.burst) this.buckets.delete(key);
    }
  }
}
