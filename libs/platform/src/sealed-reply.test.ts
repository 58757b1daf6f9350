import { describe, expect, it } from 'vitest';
import { newReplyKey, parseReplyKey, seal } from './sealed-reply.js';

const SUBJECT = 'runs.claim';
const secret = new TextEncoder().encode('{"ok":true,"result":{"prompt":"MARKER-7f3a"}}');

function sealFor(publicKey: string, aad = SUBJECT) {
  const to = parseReplyKey(publicKey);
  if (!to) throw new Error('key did not parse');
  return seal(to, secret, aad);
}

describe('sealed replies', () => {
  it('open with the caller’s key for the same subject, and show nothing of the plaintext', () => {
    const key = newReplyKey();
    const box = sealFor(key.publicKey);
    expect(Buffer.from(key.open(box, SUBJECT)).toString()).toBe(Buffer.from(secret).toString());
    expect(JSON.stringify(box)).not.toContain('MARKER');
    expect(Buffer.from(box.data, 'base64url').toString('latin1')).not.toContain('MARKER');
  });

  it('use a new responder key and nonce every time', () => {
    const key = newReplyKey();
    const [a, b] = [sealFor(key.publicKey), sealFor(key.publicKey)];
    expect(a.key).not.toBe(b.key);
    expect(a.iv).not.toBe(b.iv);
    expect(a.data).not.toBe(b.data);
  });

  it('refuse to open when a byte of the ciphertext, the tag or the nonce was changed', () => {
    const key = newReplyKey();
    const box = sealFor(key.publicKey);
    const data = Buffer.from(box.data, 'base64url');
    for (const at of [0, data.length - 1]) {
      const altered = Buffer.from(data);
      altered[at]! ^= 1;
      expect(() => key.open({ ...box, data: altered.toString('base64url') }, SUBJECT)).toThrow();
    }
    const iv = Buffer.from(box.iv, 'base64url');
    iv[0]! ^= 1;
    expect(() => key.open({ ...box, iv: iv.toString('base64url') }, SUBJECT)).toThrow();
    expect(() => key.open({ ...box, data: data.subarray(0, 8).toString('base64url') }, SUBJECT)).toThrow();
  });

  it('refuse to open as another endpoint’s reply (the subject is bound)', () => {
    const key = newReplyKey();
    expect(() => key.open(sealFor(key.publicKey), 'repohost.token')).toThrow();
  });

  it('refuse to open with another key, or with the responder key swapped', () => {
    const key = newReplyKey();
    const other = newReplyKey();
    const box = sealFor(key.publicKey);
    expect(() => other.open(box, SUBJECT)).toThrow();
    expect(() => key.open({ ...box, key: sealFor(key.publicKey).key }, SUBJECT)).toThrow();
  });

  it('take no reply key that is not a usable X25519 public key', () => {
    expect(parseReplyKey(undefined)).toBeNull();
    expect(parseReplyKey('')).toBeNull();
    expect(parseReplyKey('not a key')).toBeNull();
    expect(parseReplyKey(Buffer.alloc(31, 7).toString('base64url'))).toBeNull();
    // Low-order points: every shared secret with them is all zeros, which anyone can compute.
    expect(parseReplyKey(Buffer.alloc(32).toString('base64url'))).toBeNull();
    expect(parseReplyKey(Buffer.from([1, ...Buffer.alloc(31)]).toString('base64url'))).toBeNull();
    expect(parseReplyKey(newReplyKey().publicKey)).not.toBeNull();
  });
});
