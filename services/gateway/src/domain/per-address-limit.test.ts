import { describe, expect, it } from 'vitest';
import { addressKey, FailureLimiter, PerAddressLimiter } from './per-address-limit.js';

describe('addressKey', () => {
  it('keeps an IPv4 address, and unwraps an IPv4-mapped one', () => {
    expect(addressKey('203.0.113.7')).toBe('203.0.113.7');
    expect(addressKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressKey('::FFFF:203.0.113.7')).toBe('203.0.113.7');
  });

  it('limits IPv6 by /64: every address of one host’s block is one caller', () => {
    const key = addressKey('2001:db8:1:2::1');
    expect(key).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff')).toBe(key);
    expect(addressKey('2001:db8:1:2:abcd::')).toBe(key);
    expect(addressKey('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('64:ff9b::192.0.2.1')).toBe('64:ff9b:0:0::/64');
    expect(addressKey('2001:db8:1:3::1')).not.toBe(key);
  });
});

describe('PerAddressLimiter', () => {
  it('counts per address only the attempts that were not refunded', () => {
    let now = 0;
    const limiter = new PerAddressLimiter({ perSecond: 1, burst: 2 }, () => now);
    // Successes give their token back: any number of them.
    for (let i = 0; i < 10; i++) {
      expect(limiter.take('198.51.100.1').allowed).toBe(true);
      limiter.refund('198.51.100.1');
    }
    // Failures keep theirs.
    expect(limiter.take('198.51.100.1').allowed).toBe(true);
    expect(limiter.take('198.51.100.1').allowed).toBe(true);
    expect(limiter.take('198.51.100.1')).toEqual({ allowed: false, retryAfterSeconds: 1 });
    // Another address, and another address of the same IPv6 /64.
    expect(limiter.take('198.51.100.2').allowed).toBe(true);
    expect(limiter.take('2001:db8::1').allowed).toBe(true);
    expect(limiter.take('2001:db8::2').allowed).toBe(true);
    expect(limiter.take('2001:db8::3').allowed).toBe(false);
    now += 1_000;
    expect(limiter.take('198.51.100.1').allowed).toBe(true);
    expect(limiter.size).toBe(3);
  });
});

describe('FailureLimiter', () => {
  const begin = (limiter: FailureLimiter, address = '198.51.100.1') => {
    const attempt = limiter.begin(address);
    if (!attempt.allowed) throw new Error(`refused: retry in ${attempt.retryAfterSeconds} s`);
    return attempt;
  };

  it('lets any number of attempts that succeed run at once, up to the in-flight bound', () => {
    const limiter = new FailureLimiter({ perSecond: 1, burst: 2 }, 50, () => 0);
    const attempts = Array.from({ length: 50 }, () => begin(limiter));
    expect(limiter.begin('198.51.100.1')).toEqual({ allowed: false, retryAfterSeconds: 1 });
    for (const attempt of attempts) attempt.end(false);
    for (let i = 0; i < 100; i++) begin(limiter).end(false);
  });

  it('charges failures only, past the budget too, and refuses until they have been paid back', () => {
    let now = 0;
    const limiter = new FailureLimiter({ perSecond: 1, burst: 2 }, 10, () => now);
    // A wave of four guesses all started before any failed: each is charged once it has.
    const wave = Array.from({ length: 4 }, () => begin(limiter));
    for (const attempt of wave) attempt.end(true);
    // Two tokens, four failures: -2, so three seconds until one is there again.
    expect(limiter.begin('198.51.100.1')).toEqual({ allowed: false, retryAfterSeconds: 3 });
    expect(limiter.begin('198.51.100.2').allowed).toBe(true);
    now += 3_000;
    const next = begin(limiter);
    next.end(true);
    next.end(true);
    expect(limiter.begin('198.51.100.1')).toEqual({ allowed: false, retryAfterSeconds: 1 });
  });
});
