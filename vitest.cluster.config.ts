import { defineConfig } from 'vitest/config';

// The chart on a real Kubernetes control plane (test/cluster): etcd, kube-apiserver, the
// controllers, the scheduler and kwok, built from the Go module proxy by deploy/local/tools.mjs and
// started by the test. Its own command (`npm run test:cluster`), because the first build of the
// control plane takes long; once cached it starts in seconds.
// No `import` among them: it would apply to `require` too, and `ws` (client-node's exec) required as
// its ESM wrapper hands isomorphic-ws a namespace instead of the WebSocket class.
const conditions = ['threadwork-source', 'node', 'default'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: ['threadwork-source'] } },
  test: {
    include: ['test/cluster/**/*.test.ts'],
    // NATS and the database, for the runner that serves runs in sandbox pods.
    globalSetup: ['libs/testing/src/global-setup.ts'],
    // Hang guards: a loaded two-core machine rolls a dozen pods slowly.
    testTimeout: 600_000,
    hookTimeout: 900_000,
    fileParallelism: false,
    maxWorkers: 1,
    // The tests of a file build on each other (install, upgrade, uninstall).
    sequence: { concurrent: false },
    reporters: ['default', 'json'],
    outputFile: { json: '.test-results/cluster.json' },
  },
});
