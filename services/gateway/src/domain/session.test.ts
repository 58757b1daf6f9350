import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  clearSessionCookie,
  generateSessionSecret,
  readCookie,
  sameOriginPath,
  sessionSetCookie,
  signSession,
  verifySession,
} from './session.js';

const secret = 'a-secret-that-is-long-enough-for-hmac';
const now = 1_800_000_000;

describe('session cookies', () => {
  it('round-trips a user id and its session epoch until it expires', () => {
    const value = signSession('usr_abc', now + 60, secret);
    expect(value).toMatch(/^usr_abc\.0\.1800000060\.[A-Za-z0-9_-]{43}$/);
    expect(verifySession(value, secret, now)).toEqual({ userId: 'usr_abc', epoch: 0 });
    expect(verifySession(value, secret, now + 59)).toEqual({ userId: 'usr_abc', epoch: 0 });
    expect(verifySession(value, secret, now + 60)).toBeNull();
    expect(verifySession(signSession('usr_abc', now + 60, secret, 7), secret, now)).toEqual({
      userId: 'usr_abc',
      epoch: 7,
    });
  });

  it('refuses the older three-part cookie, even correctly signed', () => {
    const payload = `usr_abc.${now + 60}`;
    const old = `${payload}.${createHmac('sha256', secret).update(payload).digest('base64url')}`;
    expect(verifySession(old, secret, now)).toBeNull();
  });

  it('rejects another secret, tampering and malformed values', () => {
    const value = signSession('usr_abc', now + 60, secret);
    expect(verifySession(value, `${secret}x`, now)).toBeNull();
    expect(verifySession(value.replace('usr_abc', 'usr_abd'), secret, now)).toBeNull();
    expect(verifySession(value.replace('1800000060', '1900000060'), secret, now)).toBeNull();
    expect(verifySession(value.replace('usr_abc.0.', 'usr_abc.1.'), secret, now)).toBeNull();
    for (const bad of [
      '',
      'a.b',
      'a.b.c.d.e',
      'usr_abc.0.soon.sig',
      'usr_abc.x.1800000060.sig',
      `usr abc.0.${now + 60}.x`,
      `usr_abc.0.${now + 60}.`,
    ]) {
      expect(verifySession(bad, secret, now)).toBeNull();
    }
  });

  it('accepts only the canonical encoding of the signature', () => {
    const value = signSession('usr_abc', now + 60, secret);
    const last = value.at(-1)!;
    // 32 bytes are 43 base64url characters; the last one carries 2 spare bits that decoding drops.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const index = alphabet.indexOf(last);
    const sibling = alphabet[index ^ 1]!;
    const variant = value.slice(0, -1) + sibling;
    expect(Buffer.from(variant.split('.')[3]!, 'base64url')).toEqual(Buffer.from(value.split('.')[3]!, 'base64url'));
    expect(verifySession(variant, secret, now)).toBeNull();
  });

  it('refuses to sign what it could not read back', () => {
    expect(() => signSession('usr.abc', now, secret)).toThrow(RangeError);
    expect(() => signSession('usr_abc', -1, secret)).toThrow(RangeError);
    expect(() => signSession('usr_abc', now, secret, -1)).toThrow(RangeError);
  });

  it('reads one cookie out of a Cookie header', () => {
    expect(readCookie('a=1; tw_session=x.y.z; b=2', 'tw_session')).toBe('x.y.z');
    expect(readCookie('tw_session="quoted"', 'tw_session')).toBe('quoted');
    expect(readCookie('xtw_session=1', 'tw_session')).toBeNull();
    expect(readCookie(undefined, 'tw_session')).toBeNull();
  });

  it('makes random secrets and cookie attributes, Secure over TLS', () => {
    expect(generateSessionSecret()).not.toBe(generateSessionSecret());
    expect(generateSessionSecret().length).toBeGreaterThanOrEqual(32);
    expect(sessionSetCookie('v', 3600, true)).toBe(
      'tw_session=v; Max-Age=3600; HttpOnly; Path=/; SameSite=Lax; Secure',
    );
    expect(sessionSetCookie('v', 3600, false)).toBe('tw_session=v; Max-Age=3600; HttpOnly; Path=/; SameSite=Lax');
    expect(clearSessionCookie(false)).toBe('tw_session=; Max-Age=0; HttpOnly; Path=/; SameSite=Lax');
  });

  it('lets a login go on only to a path of this origin', () => {
    for (const path of ['/', '/threads/thr_1', '/threads?tab=runs#x', '/a//b']) expect(sameOriginPath(path)).toBe(path);
    for (const bad of [
      undefined,
      '',
      '//evil.com',
      '/\\evil.com',
      '\\evil.com',
      'https://evil.com',
      'javascript:alert(1)',
      '/\tevil',
      '/\t/evil.com',
      'evil.com',
    ]) {
      expect(sameOriginPath(bad), String(bad)).toBe('/');
    }
  });
});
