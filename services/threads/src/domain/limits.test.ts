import { describe, expect, it } from 'vitest';
import { fitPage, SerialByKey, threadRateRetryAfter } from './limits.js';

describe('SerialByKey', () => {
  it('runs one task at a time per key, in arrival order, and other keys alongside', async () => {
    const serial = new SerialByKey(10_000);
    const order: string[] = [];
    let releaseFirst!: () => void;
    const first = serial.run('alice', async () => {
      order.push('a1 start');
      await new Promise<void>((resolve) => (releaseFirst = resolve));
      order.push('a1 end');
    });
    const second = serial.run('alice', async () => void order.push('a2'));
    const other = serial.run('bob', async () => void order.push('b1'));
    await other;
    expect(order).toEqual(['a1 start', 'b1']);
    releaseFirst();
    await Promise.all([first, second]);
    expect(order).toEqual(['a1 start', 'b1', 'a1 end', 'a2']);
    expect(serial.size).toBe(0);
  });

  it('gives up a turn not come within its wait with unavailable, and the line goes on', async () => {
    const serial = new SerialByKey(50);
    let release!: () => void;
    const holder = serial.run('alice', () => new Promise<void>((resolve) => (release = resolve)));
    const waiter = serial.run('alice', async () => 'never');
    await expect(waiter).rejects.toMatchObject({ code: 'unavailable' });
    release();
    await holder;
    await expect(serial.run('alice', async () => 'next')).resolves.toBe('next');
    expect(serial.size).toBe(0);
  });

  it('goes on after a task that failed', async () => {
    const serial = new SerialByKey(10_000);
    await expect(serial.run('alice', () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(serial.run('alice', async () => 42)).resolves.toBe(42);
    expect(serial.size).toBe(0);
  });
});

describe('fitPage', () => {
  const size = (n: number) => n;
  it('takes up to the limit', () => {
    expect(fitPage([1, 1, 1, 1], 3, 100, size)).toBe(3);
    expect(fitPage([], 3, 100, size)).toBe(0);
  });
  it('stops before the item that would pass the budget, but always takes the first', () => {
    expect(fitPage([40, 40, 40], 10, 100, size)).toBe(2);
    expect(fitPage([40, 60, 1], 10, 100, size)).toBe(2);
    expect(fitPage([500, 1], 10, 100, size)).toBe(1);
  });
});

describe('threadRateRetryAfter', () => {
  it('is the time until the creation that makes room is a minute old, rounded up, at least 1 s', () => {
    const now = Date.parse('2026-01-01T00:01:00.000Z');
    expect(threadRateRetryAfter(new Date('2026-01-01T00:00:30.000Z'), now)).toBe(30);
    expect(threadRateRetryAfter(new Date('2026-01-01T00:00:00.200Z'), now)).toBe(1);
    expect(threadRateRetryAfter(new Date('2026-01-01T00:00:59.001Z'), now)).toBe(60);
    expect(threadRateRetryAfter(null, now)).toBe(1);
  });
});
