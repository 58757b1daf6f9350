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

  /** Gives back a token taken for `key` (a request that proved itself), up to the bucket's size. */
  refund(key: string, nowMs: number): void {
    const bucket = this.refilled(key, nowMs);
    bucket.tokens = Math.min(this.limit.burst, bucket.tokens + 1);
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

/**
 * The key a client address is limited by: an IPv4 address as it is, an IPv6 address by its /64
 * (one host is usually given a whole /64, and could take a fresh address for every request),
 * an IPv4-mapped IPv6 address as the IPv4 address it is.
 */
export function addressKey(address: string): string {
  const ip = address.split('%', 1)[0] ?? address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (!ip.includes(':')) return ip;
  const [head = '', tail = ''] = ip.split('::', 2);
  const left = head === '' ? [] : head.split(':');
  const right = ip.includes('::') ? (tail === '' ? [] : tail.split(':')) : [];
  const groups = ip.includes('::')
    ? [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
    : left;
  const prefix = groups
    .slice(0, 4)
    .map((group) => (group.replace(/^0+(?=.)/, '') || '0').toLowerCase())
    .join(':');
  return `${prefix}::/64`;
}
