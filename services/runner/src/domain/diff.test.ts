import { describe, expect, it } from 'vitest';
import { parseNameStatus, parseNumstat } from './diff.js';

describe('git diff machine formats', () => {
  it('reads --name-status -z, renames by their new path, paths with odd characters intact', () => {
    const out = [
      'M',
      'README.md',
      'A',
      'dir/with space.txt',
      'D',
      'gone.txt',
      'R087',
      'old name',
      'new\tname',
      'T',
      'link',
      '',
    ].join('\0');
    expect(parseNameStatus(out)).toEqual([
      { path: 'README.md', status: 'modified' },
      { path: 'dir/with space.txt', status: 'added' },
      { path: 'gone.txt', status: 'deleted' },
      { path: 'new\tname', status: 'renamed' },
      { path: 'link', status: 'modified' },
    ]);
    expect(parseNameStatus('')).toEqual([]);
  });

  it('sums --numstat -z, counting binary files as nothing and skipping rename paths', () => {
    const out = ['3\t1\tREADME.md', '-\t-\timage.png', '5\t0\t', 'old', 'new', '2\t2\tsrc/x.ts', ''].join('\0');
    expect(parseNumstat(out)).toEqual({ additions: 10, deletions: 3 });
    expect(parseNumstat('')).toEqual({ additions: 0, deletions: 0 });
  });
});
