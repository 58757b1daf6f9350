import type { DiffFile, FileChangeKind, ReviewStats } from '@threadwork/contracts';

// Reading git's machine formats (`diff --name-status -z`, `diff --numstat -z`) into the review's
// vocabulary. NUL-separated output keeps paths with spaces, tabs or newlines intact.

const STATUS: Record<string, FileChangeKind> = {
  A: 'added',
  C: 'added',
  D: 'deleted',
  M: 'modified',
  T: 'modified',
  R: 'renamed',
};

/** `git diff --name-status -z -M`: `M\0path\0`, `R100\0old\0new\0`, … → files (renames by their new path). */
export function parseNameStatus(output: string): DiffFile[] {
  const fields = output.split('\0');
  const files: DiffFile[] = [];
  let i = 0;
  while (i < fields.length) {
    const code = fields[i] ?? '';
    if (!code) {
      i++;
      continue;
    }
    const letter = code[0] ?? '';
    if (letter === 'R' || letter === 'C') {
      const to = fields[i + 2] ?? '';
      files.push({ path: to, status: STATUS[letter] ?? 'modified' });
      i += 3;
    } else {
      files.push({ path: fields[i + 1] ?? '', status: STATUS[letter] ?? 'modified' });
      i += 2;
    }
  }
  return files;
}

/**
 * `git diff --numstat -z -M`: `adds\tdels\tpath\0`, or for a rename `adds\tdels\t\0old\0new\0`.
 * Binary files count `-`, which adds nothing.
 */
export function parseNumstat(output: string): ReviewStats {
  const fields = output.split('\0');
  let additions = 0;
  let deletions = 0;
  let i = 0;
  while (i < fields.length) {
    const field = fields[i] ?? '';
    const match = /^(-|\d+)\t(-|\d+)\t(.*)$/s.exec(field);
    if (!match) {
      i++;
      continue;
    }
    if (match[1] !== '-') additions += Number(match[1]);
    if (match[2] !== '-') deletions += Number(match[2]);
    // An empty path means a rename: the two paths follow as fields of their own.
    i += match[3] === '' ? 3 : 1;
  }
  return { additions, deletions };
}
