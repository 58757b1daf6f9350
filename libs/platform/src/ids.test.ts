import { describe, expect, it } from 'vitest';
import { newId } from './ids.js';

describe('newId', () => {
  it('prefixes 32 random hex digits', () => {
    expect(newId('run')).toMatch(/^run_[0-9a-f]{32}$/);
    expect(newId('run')).not.toBe(newId('run'));
  });
});
