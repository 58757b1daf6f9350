import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { baseConfigShape, ConfigError, env, loadConfig } from './config.js';

const Schema = z.object({ ...baseConfigShape, PORT: env.port(8080), FLAG: env.bool(false) });

describe('loadConfig', () => {
  it('applies defaults and coerces values', () => {
    const config = loadConfig(Schema, { PORT: '9090', FLAG: 'yes' });
    expect(config.PORT).toBe(9090);
    expect(config.FLAG).toBe(true);
    expect(config.NATS_URL).toBe('nats://127.0.0.1:4222');
    expect(config.MONGO_DB_PREFIX).toBe('threadwork');
    expect(config.SHUTDOWN_TIMEOUT_MS).toBe(10_000);
    expect(config.NATS_STREAM_REPLICAS).toBe(1);
    expect(config.NATS_PUBLISH_RETRY_MS).toBe(15_000);
  });

  it('takes a stream replica count a cluster can have, and a publish retry inside the dedupe window', () => {
    expect(loadConfig(Schema, { NATS_STREAM_REPLICAS: '3' }).NATS_STREAM_REPLICAS).toBe(3);
    for (const bad of [
      { NATS_STREAM_REPLICAS: '0' },
      { NATS_STREAM_REPLICAS: '6' },
      { NATS_PUBLISH_RETRY_MS: '120000' },
    ]) {
      expect(() => loadConfig(Schema, bad)).toThrow(ConfigError);
    }
  });

  it('names the variable and the bad value in one line', () => {
    let error: unknown;
    try {
      loadConfig(Schema, { PORT: 'eighty' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toMatch(/^invalid configuration: PORT: .*\(got "eighty"\)$/);
    expect(message).not.toContain('\n');
  });

  it('reports every bad variable', () => {
    const message = (() => {
      try {
        loadConfig(Schema, { PORT: '70000', LOG_LEVEL: 'loud', MONGO_DB_PREFIX: 'has space' });
      } catch (err) {
        return (err as Error).message;
      }
      return '';
    })();
    for (const name of ['PORT', 'LOG_LEVEL', 'MONGO_DB_PREFIX']) expect(message).toContain(`${name}: `);
  });
});
