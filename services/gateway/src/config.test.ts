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

  it('trusts no proxy by default, and reads true or addresses and ranges, not a hop count', () => {
    const trust = (TRUST_PROXY?: string) =>
      loadConfig(GatewayConfig, TRUST_PROXY === undefined ? {} : { TRUST_PROXY }).TRUST_PROXY;
    expect(trust()).toBe(false);
    expect(trust('')).toBe(false);
    expect(trust('true')).toBe(true);
    expect(trust('10.0.0.0/8, 127.0.0.1,fd00::/8,loopback')).toEqual([
      '10.0.0.0/8',
      '127.0.0.1',
      'fd00::/8',
      'loopback',
    ]);
    // fastify trusts no one with a hop count: refused rather than silently doing nothing.
    for (const bad of ['1', '10.0.0.0/33', 'proxy.internal', '10.0.0.1/8/1']) {
      expect(() => trust(bad)).toThrow(/TRUST_PROXY: .* is not an address, CIDR range or named range/);
    }
  });

  it('limits the public paths per address, and reads the webhook secret', () => {
    expect(loadConfig(GatewayConfig, {})).toMatchObject({
      PUBLIC_RATE_LIMIT_PER_SECOND: 5,
      PUBLIC_RATE_LIMIT_BURST: 50,
    });
    expect(loadConfig(GatewayConfig, {}).GITHUB_WEBHOOK_SECRET).toBeUndefined();
    expect(loadConfig(GatewayConfig, { GITHUB_WEBHOOK_SECRET: '' }).GITHUB_WEBHOOK_SECRET).toBeUndefined();
    expect(loadConfig(GatewayConfig, { GITHUB_WEBHOOK_SECRET: 's' }).GITHUB_WEBHOOK_SECRET).toBe('s');
  });
});
