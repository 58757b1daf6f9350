import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root } from './support/process-stack.js';

// The last line of `.ci/run` (deploy/local/summary.mjs), read from reports a real vitest wrote
// for small test files: the count must agree with the exit code, so a file whose setup failed
// counts its tests as failed, not as skipped.

const vitest = join(root, 'node_modules', 'vitest', 'vitest.mjs');
const summary = join(root, 'deploy', 'local', 'summary.mjs');

/** Runs vitest on `files` (globals on: the files sit outside the workspace) and returns its JSON report's path. */
function report(dir: string, name: string, files: Record<string, string>): string {
  for (const [file, text] of Object.entries(files)) {
    writeFileSync(join(dir, `${name}-${file}`), text);
  }
  const out = join(dir, `${name}.json`);
  spawnSync(
    process.execPath,
    [vitest, 'run', '--root', dir, '--globals', '--reporter=json', `--outputFile=${out}`, `${name}-`],
    { cwd: dir, encoding: 'utf8', timeout: 120_000 },
  );
  return out;
}

function summarize(...reports: string[]): { status: number | null; lines: string[] } {
  const res = spawnSync(process.execPath, [summary, ...reports], { cwd: root, encoding: 'utf8', timeout: 30_000 });
  return { status: res.status, lines: res.stdout.trim().split('\n') };
}

describe('the CI summary line', () => {
  let dir: string;
  let green: string;
  let broken: string;
  let red: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'threadwork-summary-'));
    green = report(dir, 'green', {
      'a.test.js': `it('one', () => {}); it('two', () => {}); it.skip('later', () => {});`,
    });
    broken = report(dir, 'broken', {
      'ok.test.js': `it('fine', () => {});`,
      'setup.test.js': `beforeAll(() => { throw new Error('the server did not start'); });
        it('first', () => {}); it('second', () => {});`,
      'import.test.js': `throw new Error('cannot load');`,
    });
    red = report(dir, 'red', {
      'helper.js': `export const waitFor = () => { throw new Error('Timeout 30000ms exceeded.'); };`,
      'wait.test.js': `import { waitFor } from './red-helper.js';
        it('passes', () => {});
        it('waits', () => {
          waitFor();
        });`,
    });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('counts passed, failed and skipped tests, and exits 0 when none failed', () => {
    const { status, lines } = summarize(green);
    expect(lines).toEqual(['2 passed, 0 failed, 1 skipped']);
    expect(status).toBe(0);
  });

  it('counts every test of a file that failed to set up or load as failed, and names the file', () => {
    const { status, lines } = summarize(green, broken);
    expect(lines.at(-1)).toBe('3 passed, 3 failed, 1 skipped');
    const named = lines.filter((line) => line.startsWith('failed to run:')).sort();
    expect(named).toEqual([
      expect.stringContaining('broken-import.test.js'),
      expect.stringContaining('broken-setup.test.js'),
    ]);
    expect(status).toBe(1);
  });

  it('names a failed test with the line of its file where it gave up, and its message', () => {
    const { status, lines } = summarize(red);
    expect(lines).toEqual([
      expect.stringMatching(/^failed: .*red-wait\.test\.js:4 > waits$/),
      '  Error: Timeout 30000ms exceeded.',
      '1 passed, 1 failed',
    ]);
    expect(status).toBe(1);
  });

  it('fails when a report is missing or no test ran', () => {
    expect(summarize(green, join(dir, 'absent.json')).status).toBe(1);
    const empty = join(dir, 'empty.json');
    writeFileSync(empty, JSON.stringify({ testResults: [] }));
    expect(summarize(empty)).toEqual({ status: 1, lines: ['0 passed, 0 failed'] });
  });
});
