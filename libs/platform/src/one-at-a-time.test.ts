import { describe, expect, it } from 'vitest';
import { OneAtATime } from './one-at-a-time.js';

describe('one task at a time per key', () => {
  it('runs a key’s tasks in order, a failed one not stopping the next, and other keys beside them', async () => {
    const queue = new OneAtATime();
    const done: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const first = queue.run('a', async () => {
      await held;
      done.push('a1');
    });
    const failed = queue.run('a', () => Promise.reject(new Error('no')));
    const third = queue.run('a', async () => done.push('a3'));
    await queue.run('b', async () => done.push('b1'));
    expect(done).toEqual(['b1']);
    expect(queue.busy('a')).toBe(true);

    release();
    await first;
    await expect(failed).rejects.toThrow('no');
    await third;
    await queue.idle();
    expect(done).toEqual(['b1', 'a1', 'a3']);
    expect(queue.busy('a')).toBe(false);
    expect(queue.busy('b')).toBe(false);
  });
});
