#!/usr/bin/env node
// Prints `N passed, N failed[, N skipped]` from a vitest JSON report; exits 1 when the report is
// missing, a test failed, or no test ran at all.
import { existsSync, readFileSync } from 'node:fs';

const file = process.argv[2] ?? '.test-results/vitest.json';
if (!existsSync(file)) {
  process.stdout.write('0 passed, 0 failed\n');
  process.stderr.write(`no test report at ${file}: the test run did not finish\n`);
  process.exit(1);
}
const report = JSON.parse(readFileSync(file, 'utf8'));
const passed = report.numPassedTests ?? 0;
const failed = report.numFailedTests ?? 0;
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
// A file that failed to load counts no test but is a failure all the same.
const brokenSuites = report.numFailedTestSuites ?? 0;
process.stdout.write(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
process.exit(failed > 0 || brokenSuites > 0 || passed === 0 ? 1 : 0);
