import { defineConfig } from 'vitest/config';

// The fault tests (test/chaos): each file starts a whole deployment of its own — nats-server,
// FerretDB and every service as a process — and kills parts of it by pid. One file at a time,
// so that on a small machine a fault is the only thing disturbing it.
const conditions = ['threadwork-source', 'node', 'import', 'default'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['threadwork-source'] } },
  test: {
    include: ['test/chaos/**/*.test.ts'],
    // The run's jitter seed, printed first; each test then draws from its own stream of it.
    globalSetup: ['test/chaos/support/seed-setup.ts'],
    setupFiles: ['test/chaos/support/replay.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    fileParallelism: false,
    maxWorkers: 1,
    reporters: ['default', 'json'],
    outputFile: { json: '.test-results/chaos.json' },
  },
});
