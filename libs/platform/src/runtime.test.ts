import { describe, expect, it } from 'vitest';
import { BaseConfig, loadConfig } from './config.js';
import { plaintextNatsProblem } from './nats-auth.js';
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

describe('NATS over a network in production', () => {
  const config = (env: Record<string, string>) =>
    loadConfig(BaseConfig, { NATS_INSECURE: 'true', MONGO_URL: 'mongodb://127.0.0.1:1/', ...env });

  it('is refused in clear before connecting, naming the servers and the ways out', async () => {
    const previous = process.env.NODE_ENV;
    process.env.NODE_ENV = 'production';
    try {
      // Port 1 of a name that never resolves: a start that got as far as connecting would fail differently.
      const clear = config({ NATS_URL: 'nats://nats.invalid:1,tls://nats-2.invalid:1' });
      await expect(startRuntime({ name: 'runner', config: clear, mongo: false })).rejects.toThrow(
        /^invalid configuration: NATS_URL: nats:\/\/nats\.invalid:1 would be reached without TLS; .*NATS_TLS_CA.*NATS_ALLOW_PLAINTEXT=true/,
      );
    } finally {
      process.env.NODE_ENV = previous;
    }
  });

  it('is accepted over TLS, on this host, outside production, or when the network is said to encrypt', () => {
    const cases: [Record<string, string>, string | undefined, boolean][] = [
      [{ NATS_URL: 'tls://nats:4222' }, 'production', true],
      [{ NATS_URL: 'nats://nats:4222', NATS_TLS_CA: '/etc/ca.crt' }, 'production', true],
      [{ NATS_URL: 'nats://127.0.0.1:4222,localhost:4223,nats://[::1]:4224' }, 'production', true],
      [{ NATS_URL: 'nats://nats:4222', NATS_ALLOW_PLAINTEXT: 'true' }, 'production', true],
      [{ NATS_URL: 'nats://nats:4222' }, 'development', true],
      [{ NATS_URL: 'nats://nats:4222' }, undefined, true],
      [{ NATS_URL: 'nats.example.com:4222' }, 'production', false],
      [{ NATS_URL: 'tls://a:1,nats://b:1' }, 'production', false],
    ];
    for (const [env, nodeEnv, accepted] of cases) {
      expect(plaintextNatsProblem(config(env), nodeEnv) === null, JSON.stringify({ env, nodeEnv })).toBe(accepted);
    }
  });
});
