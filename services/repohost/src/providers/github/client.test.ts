import { createPublicKey, generateKeyPairSync, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createJwtFactory } from './client.js';

describe('createJwtFactory', () => {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const decode = (part: string) =>
    JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;

  it('signs RS256 JWTs issued by the app, backdated a minute, for nine minutes', async () => {
    let now = 1_700_000_000_000;
    const createJwt = createJwtFactory(42, privateKey, () => now);
    const { jwt, expiresAt } = await createJwt(42);
    const [header, payload, signature] = jwt.split('.') as [string, string, string];
    expect(decode(header)).toEqual({ alg: 'RS256', typ: 'JWT' });
    expect(decode(payload)).toEqual({ iat: 1_700_000_000 - 60, exp: 1_700_000_000 + 540, iss: 42 });
    expect(
      verify(
        'RSA-SHA256',
        Buffer.from(`${header}.${payload}`),
        createPublicKey(privateKey),
        Buffer.from(signature, 'base64url'),
      ),
    ).toBe(true);
    expect(expiresAt).toBe(new Date((1_700_000_000 + 540) * 1000).toISOString());
    now += 1000;
  });

  it('reuses a JWT until a minute before it expires, and makes a new one for a clock correction', async () => {
    let now = 1_700_000_000_000;
    const createJwt = createJwtFactory(42, privateKey, () => now);
    const first = (await createJwt(42)).jwt;
    now += 7 * 60_000;
    expect((await createJwt(42)).jwt).toBe(first);
    expect((await createJwt(42, 30)).jwt).not.toBe(first);
    now += 60_000 + 1000;
    const later = (await createJwt(42)).jwt;
    expect(later).not.toBe(first);
  });
});
