import { ConfigError, loadConfig } from '@threadwork/platform';
import { describe, expect, it } from 'vitest';
import { GatewayConfig } from './config.js';

describe('GatewayConfig', () => {
  it('defaults the rate limit and leaves the session secret to be generated outside production', () => {
    const config = loadConfig(GatewayConfig, {});
    expect(config).toMatchObject({ RATE_LIMIT_PER_SECOND: 20, RATE_LIMIT_BURST: 100, REQUEST_TIMEOUT_MS: 5_000 });
    expect(config.SESSION_SECRET).toBeUndefined();
  });

  it('requires a session secret of 32+ characters in production', () => {
    expect(() => loadConfig(GatewayConfig, { NODE_ENV: 'production' })).toThrow(/SESSION_SECRET: required/);
    expect(() => loadConfig(GatewayConfig, { SESSION_SECRET: 'short' })).toThrow(ConfigError);
    const secret = 'x'.repeat(32);
    expect(loadConfig(GatewayConfig, { NODE_ENV: 'production', SESSION_SECRET: secret }).SESSION_SECRET).toBe(secret);
  });

  it('rejects a rate limit that would allow nothing', () => {
    expect(() => loadConfig(GatewayConfig, { RATE_LIMIT_PER_SECOND: '0' })).toThrow(/RATE_LIMIT_PER_SECOND/);
    expect(() => loadConfig(GatewayConfig, { RATE_LIMIT_BURST: '0' })).toThrow(/RATE_LIMIT_BURST/);
  });
});
