import { defineConfig } from 'vitest/config';

// Workspace packages export their TypeScript sources under this condition, so tests run against
// src without a build step.
const conditions = ['threadwork-source', 'node', 'import', 'default'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['threadwork-source'] } },
  test: {
    include: [
      'libs/*/src/**/*.test.ts',
      'libs/*/test/**/*.test.ts',
      'services/*/src/**/*.test.ts',
      'services/*/test/**/*.test.ts',
      'test/**/*.test.ts',
    ],
    // The fault tests and the cluster test have configs of their own (vitest.chaos.config.ts,
    // vitest.cluster.config.ts).
    exclude: ['**/node_modules/**', 'test/chaos/**', 'test/cluster/**'],
    globalSetup: ['libs/testing/src/global-setup.ts'],
    // Hang guards, not budgets: on a loaded two-core machine a real codex turn can take long.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // Two cores: more workers than that only adds contention against the shared servers.
    maxWorkers: 2,
    reporters: ['default', 'json'],
    outputFile: { json: '.test-results/vitest.json' },
  },
});
