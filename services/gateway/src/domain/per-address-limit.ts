import { isIPv4, isIPv6 } from 'node:net';
import { TokenBuckets, type Decision, type RateLimit } from './rate-limit.js';

// A token bucket per client address, for what a caller does before anyone knows who it is: an API
// key that matches none costs a database lookup, and an unauthenticated route (GitHub's setup
// callback and webhooks) costs whatever it does. Like the per-user limit, it lives in this
// replica's memory. The address is the one fastify derives (`request.ip`), which honours
// TRUST_PROXY: behind a proxy that is not trusted, every client is the proxy's address.

/**
 * The key an address is limited under: an IPv4 address as it is (an IPv4-mapped IPv6 one as its
 * IPv4), an IPv6 address by its /64 — the smallest block a host is usually given, which holds more
 * addresses than a bucket each could ever be kept for.
 */
export function addressKey(address: string): string {
  const ip = address.trim().toLowerCase().replace(/%.*$/, '');
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(ip);
  if (mapped && isIPv4(mapped[1]!)) return mapped[1]!;
  if (!isIPv6(ip)) return ip;
  const hextets = expandIPv6(ip);
  return `${hextets.slice(0, 4).join(':')}::/64`;
}

/** The eight hextets of a valid IPv6 address, without leading zeros. */
function expandIPv6(ip: string): string[] {
  const [head = '', tail] = ip.split('::');
  const toHextets = (part: string) =>
    part === ''
      ? []
      : part.split(':').flatMap((piece) => {
          if (!piece.includes('.')) return [piece];
          // A trailing IPv4 part (`64:ff9b::192.0.2.1`) is the last two hextets.
          const [a, b, c, d] = piece.split('.').map(Number) as [number, number, number, number];
          return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
        });
  const front = toHextets(head);
  const back = tail === undefined ? [] : toHextets(tail);
  const zeros = Array.from({ length: 8 - front.length - back.length }, () => '0');
  return [...front, ...zeros, ...back].map((h) => h.replace(/^0+(?=.)/, ''));
}

/**
 * A limit per client address on attempts that may fail. `take` before the attempt (concurrent ones
 * cannot overrun the limit), `refund` when it did not fail: then only failures count, and a caller
 * that keeps succeeding is never held up by it.
 */
export class PerAddressLimiter {
  private readonly buckets: TokenBuckets;

  constructor(
    limit: RateLimit,
    private readonly now: () => number = Date.now,
  ) {
    this.buckets = new TokenBuckets(limit);
  }

  take(address: string): Decision {
    return this.buckets.take(addressKey(address), this.now());
  }

  refund(address: string): void {
    this.buckets.refund(addressKey(address), this.now());
  }

  /** Addresses remembered (tests, and a bound on memory: see TokenBuckets). */
  get size(): number {
    return this.buckets.size;
  }
}

/**
 * A limit per client address on attempts that turn out to fail (API keys that match no one). An
 * address with no failures left is refused before it tries; otherwise it may try, with at most
 * `maxInFlight` attempts under way at once, and only an attempt that failed is charged. So callers
 * whose keys are good are never held up, however many at once (an office behind one NAT, a client
 * whose keys are not cached yet), and a guesser gets at most `maxInFlight` attempts past the limit
 * in one wave, each of which then lengthens its wait.
 */
export class FailureLimiter {
  private readonly buckets: TokenBuckets;
  private readonly inFlight = new Map<string, number>();

  constructor(
    limit: RateLimit,
    private readonly maxInFlight: number,
    private readonly now: () => number = Date.now,
  ) {
    this.buckets = new TokenBuckets(limit);
  }

  /**
   * Starts an attempt for `address`, or says how long until it may try. The attempt's `end` is to
   * be called once, saying whether it failed.
   */
  begin(
    address: string,
  ): { allowed: true; end(failed: boolean): void } | { allowed: false; retryAfterSeconds: number } {
    const key = addressKey(address);
    const decision = this.buckets.peek(key, this.now());
    if (!decision.allowed) return decision;
    const running = this.inFlight.get(key) ?? 0;
    if (running >= this.maxInFlight) return { allowed: false, retryAfterSeconds: 1 };
    this.inFlight.set(key, running + 1);
    let ended = false;
    return {
      allowed: true,
      end: (failed) => {
        if (ended) return;
        ended = true;
        const left = (this.inFlight.get(key) ?? 1) - 1;
        if (left > 0) this.inFlight.set(key, left);
        else this.inFlight.delete(key);
        if (failed) this.buckets.charge(key, this.now(), this.maxInFlight);
      },
    };
  }

  /** Addresses remembered (tests, and a bound on memory: see TokenBuckets). */
  get size(): number {
    return this.buckets.size;
  }
}
