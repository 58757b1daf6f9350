import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** `twk_` + 40 base62 characters (~238 bits). */
const KEY_PATTERN = /^twk_[0-9A-Za-z]{40}$/;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** Characters of the key stored in clear and indexed: enough to find the row, useless alone. */
export const KEY_PREFIX_LENGTH = 12;

export interface NewKey {
  /** Shown to the user once; never stored. */
  key: string;
  prefix: string;
  hash: string;
}

function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length)) {
      // 248 = 62 * 4: rejecting bytes above it keeps every character equally likely.
      if (byte < 248 && out.length < length) out += ALPHABET[byte % 62];
    }
  }
  return out;
}

export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export function generateKey(): NewKey {
  const key = `twk_${randomBase62(40)}`;
  return { key, prefix: key.slice(0, KEY_PREFIX_LENGTH), hash: hashKey(key) };
}

export function isWellFormedKey(key: string): boolean {
  return KEY_PATTERN.test(key);
}

export function keyPrefix(key: string): string {
  return key.slice(0, KEY_PREFIX_LENGTH);
}

/** Compares a presented key with a stored hash in constant time. */
export function keyMatches(key: string, storedHash: string): boolean {
  const a = Buffer.from(hashKey(key), 'hex');
  const b = Buffer.from(storedHash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}
