import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, unlinkSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseUnifiedDiff, unquote, type DiffFileSection } from '../../console/src/review/unified-diff.js';

// The review page's diff parser, fed what the runner feeds it: real git's `diff -M` output.

const GIT_ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@example.com',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@example.com',
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: tmpdir(),
};

describe('parseUnifiedDiff on git’s own output', () => {
  let dir: string;
  let diff: string;
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, env: GIT_ENV, encoding: 'utf8' });
  const byPath = (path: string): DiffFileSection => {
    const found = parseUnifiedDiff(diff).files.find((f) => f.path === path);
    if (!found) throw new Error(`no ${path} in ${JSON.stringify(parseUnifiedDiff(diff).files.map((f) => f.path))}`);
    return found;
  };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'threadwork-diff-'));
    git('init', '--quiet', '-b', 'trunk');
    writeFileSync(join(dir, 'README.md'), 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n');
    writeFileSync(join(dir, 'gone.txt'), 'bye\n');
    writeFileSync(join(dir, 'old name.txt'), 'a\nb\nc\nd\ne\nf\n');
    writeFileSync(join(dir, 'dashes.txt'), '-- x\n++ y\nkeep\n');
    writeFileSync(join(dir, 'tail.txt'), 'no newline');
    git('add', '-A');
    git('commit', '--quiet', '-m', 'base');
    const base = git('rev-parse', 'HEAD').trim();

    writeFileSync(join(dir, 'README.md'), 'one\nTWO\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\n');
    unlinkSync(join(dir, 'gone.txt'));
    renameSync(join(dir, 'old name.txt'), join(dir, 'new name.txt'));
    writeFileSync(join(dir, 'dashes.txt'), '++ y\nkeep\n-- z\n');
    writeFileSync(join(dir, 'tail.txt'), 'no newline, still\n');
    writeFileSync(join(dir, 'añadir.md'), '# ñ\n');
    writeFileSync(join(dir, 'blob.bin'), Buffer.from([0, 1, 2, 3, 0, 255]));
    git('add', '-A');
    git('commit', '--quiet', '-m', 'candidate');
    diff = git('diff', '--no-color', '--no-ext-diff', '-M', base, 'HEAD', '--');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('finds every file with its status, in git’s order', () => {
    const files = parseUnifiedDiff(diff).files;
    expect(files.map((f) => [f.path, f.status])).toEqual([
      ['README.md', 'modified'],
      ['a\u00f1adir.md', 'added'],
      ['blob.bin', 'added'],
      ['dashes.txt', 'modified'],
      ['gone.txt', 'deleted'],
      ['new name.txt', 'renamed'],
      ['tail.txt', 'modified'],
    ]);
    expect(parseUnifiedDiff(diff).preamble).toEqual([]);
  });

  it('numbers the lines of each hunk on both sides', () => {
    const readme = byPath('README.md');
    expect(readme.additions).toBe(2);
    expect(readme.deletions).toBe(1);
    expect(readme.hunks).toHaveLength(2);
    const first = readme.hunks[0]!;
    expect(first.header).toBe('@@ -1,5 +1,5 @@');
    expect(first.lines.slice(0, 3)).toEqual([
      { kind: 'context', text: 'one', oldNumber: 1, newNumber: 1 },
      { kind: 'del', text: 'two', oldNumber: 2, newNumber: null },
      { kind: 'add', text: 'TWO', oldNumber: null, newNumber: 2 },
    ]);
    const last = readme.hunks[1]!;
    expect(last.header).toBe('@@ -8,3 +8,4 @@ seven');
    expect(last.lines.at(-1)).toEqual({ kind: 'add', text: 'eleven', oldNumber: null, newNumber: 11 });
  });

  it('keeps lines that look like file headers inside their hunk', () => {
    const dashes = byPath('dashes.txt');
    expect(dashes.hunks).toHaveLength(1);
    expect(dashes.hunks[0]!.lines).toEqual([
      { kind: 'del', text: '-- x', oldNumber: 1, newNumber: null },
      { kind: 'context', text: '++ y', oldNumber: 2, newNumber: 1 },
      { kind: 'context', text: 'keep', oldNumber: 3, newNumber: 2 },
      { kind: 'add', text: '-- z', oldNumber: null, newNumber: 3 },
    ]);
  });

  it('reads additions, deletions, renames, binaries and quoted paths', () => {
    const added = byPath('a\u00f1adir.md');
    expect(added.oldPath).toBeNull();
    expect(added.hunks[0]!.lines).toEqual([{ kind: 'add', text: '# \u00f1', oldNumber: null, newNumber: 1 }]);

    const gone = byPath('gone.txt');
    expect(gone).toMatchObject({ newPath: null, oldPath: 'gone.txt', deletions: 1, additions: 0 });

    const renamed = byPath('new name.txt');
    expect(renamed).toMatchObject({ oldPath: 'old name.txt', newPath: 'new name.txt', hunks: [] });

    expect(byPath('blob.bin')).toMatchObject({ binary: true, hunks: [] });

    const tail = byPath('tail.txt');
    expect(tail.hunks[0]!.lines.map((l) => l.kind)).toEqual(['del', 'note', 'add']);
    expect(tail.hunks[0]!.lines[1]!.text).toBe('No newline at end of file');
  });

  it('shows a diff cut at its bound up to where it stops', () => {
    const lines = diff.split('\n');
    const cut = lines.slice(0, lines.indexOf('+TWO') + 1).join('\n') + '\n';
    const { files } = parseUnifiedDiff(cut);
    expect(files).toHaveLength(1);
    expect(files[0]!.hunks[0]!.lines.at(-1)).toEqual({ kind: 'add', text: 'TWO', oldNumber: null, newNumber: 2 });
  });
});

describe('parseUnifiedDiff on other input', () => {
  it('reads a plain unified diff with no `diff --git` lines', () => {
    const { files } = parseUnifiedDiff(
      [
        '--- a/x.txt\t2020-01-01',
        '+++ b/x.txt\t2020-01-02',
        '@@ -1 +1 @@',
        '-a',
        '+b',
        '--- /dev/null',
        '+++ b/y.txt',
        '@@ -0,0 +1 @@',
        '+new',
      ].join('\n'),
    );
    expect(files.map((f) => [f.path, f.status, f.additions, f.deletions])).toEqual([
      ['x.txt', 'modified', 1, 1],
      ['y.txt', 'added', 1, 0],
    ]);
  });

  it('keeps text that is no diff at all as a preamble, and an empty diff empty', () => {
    expect(parseUnifiedDiff('xxxx\n<b>not html</b>')).toEqual({ files: [], preamble: ['xxxx', '<b>not html</b>'] });
    expect(parseUnifiedDiff('')).toEqual({ files: [], preamble: [] });
  });

  it('unquotes git’s C-style paths', () => {
    expect(unquote('"a\\303\\261b\\t\\"q\\"\\\\"')).toBe('añb\t"q"\\');
    expect(unquote('plain')).toBe('plain');
  });
});
