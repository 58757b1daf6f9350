import { GatewayConfig, startGateway } from '@threadwork/gateway';
import { loadConfig, serviceDbName, type StartedService } from '@threadwork/platform';
import { RepohostConfig, startRepohost } from '@threadwork/repohost';
import { ReviewConfig, startReview } from '@threadwork/review';
import { RunsConfig, startRuns } from '@threadwork/runs';
import { startThreads, ThreadsConfig } from '@threadwork/threads';
import { describe, expect, it } from 'vitest';

// Each service connects to MongoDB as a user of its own whose only role is readWrite on its own
// database (README "Security model"). Where the server enforces that — MongoDB with users — another
// service's credentials reach nothing here; FerretDB 1.24, which the tests run on, has no roles, so
// what can be played here is the other half: a service given another's connection string (a
// swapped Secret) refuses to start, naming the mix-up, before it connects to anything. The chart's
// side — each pod is given only its own Secret — is in test/deploy/chart.test.ts.

const SERVICES: Record<string, (env: Record<string, string>) => Promise<StartedService>> = {
  gateway: (env) => startGateway(loadConfig(GatewayConfig, env)),
  threads: (env) => startThreads(loadConfig(ThreadsConfig, env)),
  runs: (env) => startRuns(loadConfig(RunsConfig, env)),
  repohost: (env) => startRepohost(loadConfig(RepohostConfig, env)),
  review: (env) => startReview(loadConfig(ReviewConfig, env)),
};

describe('each service and the databases of the others', () => {
  it.each(Object.keys(SERVICES))('%s refuses a connection string of another service’s database', async (name) => {
    const prefix = 'acme';
    for (const other of Object.keys(SERVICES).filter((o) => o !== name)) {
      const env = {
        // Nothing listens on port 1: a start that got as far as connecting would fail otherwise.
        NATS_URL: 'nats://127.0.0.1:1',
        NATS_INSECURE: 'true',
        MONGO_DB_PREFIX: prefix,
        LOG_LEVEL: 'silent',
      };
      const named = `mongodb://${other}:pw@127.0.0.1:1/${serviceDbName(prefix, other)}?replicaSet=rs0`;
      await expect(SERVICES[name]!({ ...env, MONGO_URL: named }), `${name} with ${other}'s`).rejects.toThrow(
        `MONGO_URL: names database "${prefix}_${other}", but this service's is "${prefix}_${name}"`,
      );
      const source = `mongodb://${other}:pw@127.0.0.1:1/?authSource=${serviceDbName(prefix, other)}`;
      await expect(SERVICES[name]!({ ...env, MONGO_URL: source })).rejects.toThrow(
        `MONGO_URL: authenticates against database "${prefix}_${other}"`,
      );
    }
  });
});
