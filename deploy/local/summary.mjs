#!/usr/bin/env node
// Prints `N passed, N failed[, N skipped]` summed over vitest JSON reports (default: the suite's
// and the fault tests'); exits 1 when a report is missing, a test failed, or no test ran at all.
import { existsSync, readFileSync } from 'node:fs';

const files =
  process.argv.length > 2 ? process.argv.slice(2) : ['.test-results/vitest.json', '.test-results/chaos.json'];
let passed = 0;
let failed = 0;
let skipped = 0;
let missing = 0;
for (const file of files) {
  if (!existsSync(file)) {
    process.stderr.write(`no test report at ${file}: that test run did not finish\n`);
    missing++;
    continue;
  }
  const report = JSON.parse(readFileSync(file, 'utf8'));
  for (const suite of report.testResults ?? []) {
    const tests = suite.assertionResults ?? [];
    const failures = tests.filter((test) => test.status === 'failed');
    passed += tests.filter((test) => test.status === 'passed').length;
    failed += failures.length;
    // Name what failed just above the count, where a truncated CI log still shows it.
    if (suite.status === 'failed' && failures.length === 0) {
      // A file that failed to load or to set up ran none of its tests: each is a failure, not a
      // skip (a file with no test collected counts as one), so the count says what the exit code does.
      const notRun = tests.filter((test) => test.status !== 'passed').length;
      failed += Math.max(notRun, 1);
      process.stdout.write(`failed to run: ${suite.name}\n  ${firstLine(suite.message)}\n`);
    } else {
      skipped += tests.filter((test) => ['pending', 'skipped', 'todo'].includes(test.status)).length;
    }
    for (const test of failures) {
      const at = lineIn(suite.name, test.failureMessages?.[0]);
      process.stdout.write(
        `failed: ${suite.name}${at ? `:${at}` : ''} > ${test.fullName}\n  ${firstLine(test.failureMessages?.[0])}\n`,
      );
    }
  }
}
/** The line of `file` the failure's stack passes through first: where a wait or an assertion gave up. */
function lineIn(file, text) {
  for (const frame of String(text ?? '').split('\n')) {
    const at = frame.lastIndexOf(`${file}:`);
    if (at >= 0) return frame.slice(at + file.length + 1).split(':', 1)[0];
  }
  return undefined;
}
function firstLine(text) {
  return String(text ?? '')
    .split('\n', 1)[0]
    .slice(0, 800);
}

process.stdout.write(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
process.exit(failed > 0 || missing > 0 || passed === 0 ? 1 : 0);
