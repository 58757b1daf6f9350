import { describe, expect, it } from 'vitest';
import { newId } from './ids.js';

describe('ids', () => {
  it('prefixes 32 random hex digits', () => {
    expect(newId('thr')).toMatch(/^thr_[0-9a-f]{32}$/);
    expect(newId('ctl')).not.toBe(newId('ctl'));
  });
});
