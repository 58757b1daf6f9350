import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Cursor, Id, IdParam, Prompt, Timestamp, pageLimit, queryInt } from './common.js';

describe('Id', () => {
  it('accepts 1 and 256 characters', () => {
    expect(Id.safeParse('a').success).toBe(true);
    expect(Id.safeParse('a'.repeat(256)).success).toBe(true);
  });

  it('rejects empty and 257 characters', () => {
    expect(Id.safeParse('').success).toBe(false);
    expect(Id.safeParse('a'.repeat(257)).success).toBe(false);
  });

  it('is the path parameter', () => {
    expect(IdParam.parse({ id: 'thr_1' })).toEqual({ id: 'thr_1' });
    expect(IdParam.safeParse({ id: 'a'.repeat(257) }).success).toBe(false);
    expect(IdParam.safeParse({}).success).toBe(false);
  });
});

describe('Prompt', () => {
  it('accepts 1 and 4096 characters, rejects empty and 4097', () => {
    expect(Prompt.safeParse('x').success).toBe(true);
    expect(Prompt.safeParse('x'.repeat(4096)).success).toBe(true);
    expect(Prompt.safeParse('').success).toBe(false);
    expect(Prompt.safeParse('x'.repeat(4097)).success).toBe(false);
  });
});

describe('Timestamp', () => {
  it('accepts UTC ISO date-times as Date#toISOString writes them', () => {
    expect(Timestamp.safeParse(new Date(0).toISOString()).success).toBe(true);
    expect(Timestamp.safeParse('2025-01-02T03:04:05Z').success).toBe(true);
  });

  it('rejects dates without time, offsets and free text', () => {
    expect(Timestamp.safeParse('2025-01-02').success).toBe(false);
    expect(Timestamp.safeParse('2025-01-02T03:04:05+02:00').success).toBe(false);
    expect(Timestamp.safeParse('yesterday').success).toBe(false);
  });
});

describe('query helpers', () => {
  const Query = z.object({
    n: queryInt({ min: 2, max: 9, defaultValue: 4 }),
    limit: pageLimit({ defaultValue: 5, max: 10 }),
  });

  it('coerces strings and applies defaults for absent or empty values', () => {
    expect(Query.parse({ n: '7', limit: '10' })).toEqual({ n: 7, limit: 10 });
    expect(Query.parse({})).toEqual({ n: 4, limit: 5 });
    expect(Query.parse({ n: '', limit: '' })).toEqual({ n: 4, limit: 5 });
  });

  it('rejects out-of-range, fractional and non-numeric values', () => {
    expect(Query.safeParse({ n: '1' }).success).toBe(false);
    expect(Query.safeParse({ n: '10' }).success).toBe(false);
    expect(Query.safeParse({ n: '2.5' }).success).toBe(false);
    expect(Query.safeParse({ n: 'abc' }).success).toBe(false);
    expect(Query.safeParse({ limit: '0' }).success).toBe(false);
    expect(Query.safeParse({ limit: '11' }).success).toBe(false);
  });

  it('bounds cursors', () => {
    expect(Cursor.safeParse('c'.repeat(256)).success).toBe(true);
    expect(Cursor.safeParse('c'.repeat(257)).success).toBe(false);
  });
});
