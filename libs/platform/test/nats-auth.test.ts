import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inboxPrefix } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, ProcessConfig } from '../src/config.js';
import { natsAuthOf, natsPublicKeyOf, newNatsUserKey } from '../src/nats-auth.js';

describe('a service’s NATS credentials', () => {
  it('are required: without them it does not start, unless NATS_INSECURE says so', () => {
    const config = loadConfig(ProcessConfig, {});
    expect(() => natsAuthOf(config, 'runs')).toThrow(ConfigError);
    expect(() => natsAuthOf(config, 'runs')).toThrow(/NATS_NKEY_SEED or NATS_CREDS is required/);
    const insecure = natsAuthOf(loadConfig(ProcessConfig, { NATS_INSECURE: 'true' }), 'runs');
    expect(insecure.method).toBe('none');
    expect(insecure.authenticator).toBeUndefined();
  });

  it('take a seed, whose replies come to the identity’s own inbox prefix', () => {
    const key = newNatsUserKey();
    expect(natsPublicKeyOf(key.seed)).toBe(key.publicKey);
    const auth = natsAuthOf(loadConfig(ProcessConfig, { NATS_NKEY_SEED: key.seed }), 'runner');
    expect(auth.method).toBe('nkey');
    expect(auth.authenticator).toBeDefined();
    expect(auth.inboxPrefix).toBe(inboxPrefix('runner'));
  });

  it('refuse a malformed seed, a seed and a creds file at once, and a creds file that cannot be read', () => {
    expect(() => loadConfig(ProcessConfig, { NATS_NKEY_SEED: 'SUnotaseed' })).toThrow(
      /NATS_NKEY_SEED: an NKEY user seed/,
    );
    const both = loadConfig(ProcessConfig, { NATS_NKEY_SEED: newNatsUserKey().seed, NATS_CREDS: '/nowhere.creds' });
    expect(() => natsAuthOf(both, 'runs')).toThrow(/set one only/);
    const missing = loadConfig(ProcessConfig, { NATS_CREDS: '/nowhere/threadwork.creds' });
    expect(() => natsAuthOf(missing, 'runs')).toThrow(/NATS_CREDS: cannot read/);
  });

  it('may come from a file, as a mounted secret', () => {
    const dir = mkdtempSync(join(tmpdir(), 'threadwork-seed-'));
    try {
      const key = newNatsUserKey();
      writeFileSync(join(dir, 'runs.seed'), `${key.seed}\n`, { mode: 0o600 });
      const auth = natsAuthOf(loadConfig(ProcessConfig, { NATS_NKEY_SEED_FILE: join(dir, 'runs.seed') }), 'runs');
      expect(auth.method).toBe('nkey');
      writeFileSync(join(dir, 'bad.seed'), 'not a seed\n');
      expect(() =>
        natsAuthOf(loadConfig(ProcessConfig, { NATS_NKEY_SEED_FILE: join(dir, 'bad.seed') }), 'runs'),
      ).toThrow(/does not hold an NKEY user seed/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
