import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { startNatsServer, type LocalServer } from './servers.js';
import { uniqueDbPrefix } from './env.js';

export interface IsolatedNats {
  url: string;
  /** The server process, when this file started its own (to kill or restart it in a test). */
  server: LocalServer | undefined;
  stop(): Promise<void>;
}

/**
 * A NATS server for one test file. Services answer request/reply in queue groups named after the
 * service, so two test files running services against one server would answer each other's
 * requests; a server per file keeps them apart. Uses the run's shared server when no local binary
 * is available (servers given by NATS_URL, or containers): run such suites one file at a time.
 */
export async function isolatedNats(): Promise<IsolatedNats> {
  const binary = inject('natsServerBin');
  if (!binary) return { url: inject('natsUrl'), server: undefined, stop: async () => {} };
  const dir = mkdtempSync(join(tmpdir(), 'threadwork-nats-'));
  const server = await startNatsServer({ binary, dir });
  return {
    url: server.url,
    server,
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Environment every service shares, pointed at this file's servers with a database prefix of its
 * own: pass it (plus the service's own variables) to `loadConfig(ServiceConfig, env)`.
 */
export function baseServiceEnv(natsUrl: string, dbPrefix = uniqueDbPrefix()): Record<string, string> {
  return {
    NATS_URL: natsUrl,
    MONGO_URL: inject('mongoUrl'),
    MONGO_DB_PREFIX: dbPrefix,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    HEALTH_PORT: '0',
    SHUTDOWN_TIMEOUT_MS: '5000',
  };
}
