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

  it('limits unknown keys per address by default, and trusts no proxy unless told', () => {
    const config = loadConfig(GatewayConfig, {});
    expect(config).toMatchObject({ AUTH_FAILURES_PER_SECOND: 0.5, AUTH_FAILURES_BURST: 20, TRUST_PROXY: false });
    expect(() => loadConfig(GatewayConfig, { AUTH_FAILURES_BURST: '0' })).toThrow(/AUTH_FAILURES_BURST/);
  });

  it('reads TRUST_PROXY as fastify’s trustProxy: a flag, hops, or the proxies’ addresses and CIDRs', () => {
    const trust = (value: string) => loadConfig(GatewayConfig, { TRUST_PROXY: value }).TRUST_PROXY;
    expect(trust('false')).toBe(false);
    expect(trust('')).toBe(false);
    expect(trust('true')).toBe(true);
    expect(trust('1')).toBe(1);
    expect(trust('10.0.0.0/8, 192.0.2.7,2001:db8::/32')).toEqual(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32']);
    expect(() => trust('ingress-nginx')).toThrow(/TRUST_PROXY: "ingress-nginx" is not an address or CIDR/);
    expect(() => trust('10.0.0.0/33')).toThrow(/TRUST_PROXY/);
  });
});
