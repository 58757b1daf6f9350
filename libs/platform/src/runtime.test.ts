import { describe, expect, it } from 'vitest';
import { BaseConfig, loadConfig } from './config.js';
import { startRuntime } from './runtime.js';

describe('startRuntime', () => {
  it('refuses, before connecting to anything, a connection string that names another service’s database', async () => {
    const config = loadConfig(BaseConfig, {
      // Nothing listens on port 1: a start that got as far as connecting would fail differently.
      NATS_URL: 'nats://127.0.0.1:1',
      NATS_INSECURE: 'true',
      MONGO_URL: 'mongodb://threads:pw@127.0.0.1:1/threadwork_threads',
      MONGO_DB_PREFIX: 'threadwork',
    });
    await expect(startRuntime({ name: 'gateway', config, mongo: true })).rejects.toThrow(
      'invalid configuration: MONGO_URL: names database "threadwork_threads", but this service\'s is "threadwork_gateway"',
    );
  });
});
