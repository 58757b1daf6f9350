import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  BranchName,
  Cursor,
  Id,
  IdParam,
  Prompt,
  Timestamp,
  branchNameProblem,
  pageLimit,
  queryInt,
} from './common.js';

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

describe('BranchName', () => {
  // Names git takes and refuses, and its own verdict on each as the reference.
  const names = [
    'main',
    'release/2.x',
    'feature/añadir-ñ',
    'v1.0',
    'a@b',
    '--upload-pack=touch /tmp/pwned',
    '-x',
    'a..b',
    'a b',
    'a~1',
    'a^',
    'a:b',
    'a?',
    'a*',
    'a[b',
    'a\\b',
    'a@{1}',
    '@',
    '/a',
    'a/',
    'a//b',
    'a.',
    '.a',
    'a/.b',
    'a.lock',
    'a/b.lock/c',
    'tab\there',
  ];

  it.each(names)('agrees with git check-ref-format --branch on %j', (name) => {
    let git: boolean;
    try {
      execFileSync('git', ['check-ref-format', '--branch', name], { stdio: 'ignore' });
      // Refused here though git takes them: a leading "-" (an option to a command line), and "@",
      // which git's --branch reads as the current branch rather than a name.
      git = !name.startsWith('-') && name !== '@';
    } catch {
      git = false;
    }
    expect(branchNameProblem(name) === null).toBe(git);
    expect(BranchName.safeParse(name).success).toBe(git);
  });

  it('says what is wrong', () => {
    const result = BranchName.safeParse('--upload-pack=x');
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.message).toBe('not a branch name: must not start with "-"');
  });
});
