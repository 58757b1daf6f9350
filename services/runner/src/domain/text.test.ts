import { describe, expect, it } from 'vitest';
import { cutAtLine, cutUtf8, OutputBudget, splitUtf8 } from './text.js';

describe('byte-bounded text', () => {
  it('cuts at a byte bound without splitting a character', () => {
    expect(cutUtf8('abcdef', 4)).toBe('abcd');
    expect(cutUtf8('héllo', 2)).toBe('h');
    expect(cutUtf8('héllo', 3)).toBe('hé');
    expect(cutUtf8('€uro', 2)).toBe('');
    expect(cutUtf8('short', 100)).toBe('short');
    expect(cutUtf8('anything', 0)).toBe('');
  });

  it('splits into pieces that join back to the text', () => {
    const text = 'ab€cd€€e'.repeat(50);
    const pieces = splitUtf8(text, 7);
    expect(pieces.join('')).toBe(text);
    for (const piece of pieces) expect(Buffer.byteLength(piece)).toBeLessThanOrEqual(7);
    expect(splitUtf8('', 10)).toEqual([]);
    expect(splitUtf8('€', 1)).toEqual(['€']);
  });

  it('cuts a diff at the last whole line within the bound', () => {
    expect(cutAtLine('one\ntwo\nthree\n', 100)).toEqual({ text: 'one\ntwo\nthree\n', truncated: false });
    expect(cutAtLine('one\ntwo\nthree\n', 9)).toEqual({ text: 'one\ntwo\n', truncated: true });
    expect(cutAtLine('averyveryverylongline\nx\n', 5)).toEqual({ text: 'avery', truncated: true });
  });

  it('forwards at most the cap per command and says so once', () => {
    const budget = new OutputBudget(10);
    expect(budget.take('a', '12345')).toEqual({ text: '12345', capped: false });
    expect(budget.take('a', '678901234')).toEqual({ text: '67890', capped: true });
    expect(budget.take('a', 'more')).toEqual({ text: '', capped: false });
    expect(budget.take('b', '1234567890')).toEqual({ text: '1234567890', capped: false });
    expect(budget.take('b', 'x')).toEqual({ text: '', capped: true });
  });
});
