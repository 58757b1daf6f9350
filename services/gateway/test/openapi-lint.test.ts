import { createConfig, lintFromString, type NormalizedProblem } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.js';

// The document as the gateway serves it, through Redocly's linter with its `recommended` rules
// (what `redocly lint` runs by default): client generators and docs tools read the same things.

const SOURCE = 'openapi.json';

/**
 * Findings that are the API's nature, not defects, kept the way `redocly lint --generate-ignore-file`
 * keeps them: the setup callback, the login link and sign-in with GitHub answer with a redirect only, and the probes and
 * this document answer no client error.
 */
const INTENDED: Record<string, string[]> = {
  'operation-2xx-response': [
    '#/paths/~1v1~1repohost~1setup/get/responses',
    '#/paths/~1v1~1auth~1link/get/responses',
    '#/paths/~1v1~1auth~1github/get/responses',
    '#/paths/~1v1~1auth~1github~1callback/get/responses',
  ],
  'operation-4xx-response': [
    '#/paths/~1healthz/get/responses',
    '#/paths/~1readyz/get/responses',
    '#/paths/~1v1~1openapi.json/get/responses',
  ],
};

function describeProblem(problem: NormalizedProblem): string {
  const where = problem.location.map((l) => l.pointer).join(', ');
  return `${problem.severity} ${problem.ruleId}: ${problem.message} (${where})`;
}

describe('OpenAPI document under a linter', () => {
  let harness: Harness;
  let document: string;

  beforeAll(async () => {
    harness = await startHarness({ peers: 'none' });
    const res = await harness.app.inject({ url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    document = res.body;
  });
  afterAll(async () => {
    await harness?.close();
  });

  it('has no errors and no warnings under the recommended rules', async () => {
    const ignore = { [SOURCE]: Object.fromEntries(Object.entries(INTENDED).map(([rule, at]) => [rule, new Set(at)])) };
    const config = await createConfig({ extends: ['recommended'] }, { ignore });
    const problems = await lintFromString({ source: document, absoluteRef: SOURCE, config });
    expect(problems.filter((p) => !p.ignored).map(describeProblem)).toEqual([]);
    // Each intended exception is still there to be excused: a stale entry would hide a new finding.
    const excused = problems.filter((p) => p.ignored).map((p) => `${p.ruleId} ${p.location[0]?.pointer}`);
    expect(excused.sort()).toEqual(
      Object.entries(INTENDED)
        .flatMap(([rule, at]) => at.map((pointer) => `${rule} ${pointer}`))
        .sort(),
    );
  });
});
