import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

// Browser sessions: `tw_session=<user_id>.<expires epoch s>.<HMAC-SHA256 base64url>`. The cookie
// carries everything needed to check it, so no session table exists; the cost is that a session
// cannot be revoked before it expires except by rotating SESSION_SECRET (which ends them all).

export const SESSION_COOKIE = 'tw_session';
/** Generated secrets are this many random bytes, base64url-encoded. */
const GENERATED_SECRET_BYTES = 32;
/** User ids are `usr_<hex>`; anything with a `.` would make the cookie ambiguous. */
const USER_ID_PATTERN = /^[A-Za-z0-9_-]{1,256}$/;
const EXPIRES_PATTERN = /^[0-9]{1,12}$/;

export function generateSessionSecret(): string {
  return randomBytes(GENERATED_SECRET_BYTES).toString('base64url');
}

function signature(payload: string, secret: string): Buffer {
  return createHmac('sha256', secret).update(payload).digest();
}

/** The cookie value of a session for `userId` that expires at `expiresAt` (epoch seconds). */
export function signSession(userId: string, expiresAt: number, secret: string): string {
  if (!USER_ID_PATTERN.test(userId)) throw new RangeError(`cannot put user id ${JSON.stringify(userId)} in a session`);
  if (!Number.isInteger(expiresAt) || expiresAt < 0) throw new RangeError(`bad session expiry ${expiresAt}`);
  const payload = `${userId}.${expiresAt}`;
  return `${payload}.${signature(payload, secret).toString('base64url')}`;
}

/**
 * The user id of a well-formed, correctly signed, unexpired session value, else null. The
 * signature is compared in constant time; expiry is checked only after it, so a forged cookie
 * learns nothing from the answer.
 */
export function verifySession(value: string, secret: string, nowSeconds: number): string | null {
  const parts = value.split('.');
  if (parts.length !== 3) return null;
  const [userId, expires, given] = parts as [string, string, string];
  if (!USER_ID_PATTERN.test(userId) || !EXPIRES_PATTERN.test(expires)) return null;
  // Compared as text, not decoded bytes: base64url decoding ignores the spare bits of the last
  // character, so several strings decode to the same signature; only the canonical one is valid.
  const expected = Buffer.from(signature(`${userId}.${expires}`, secret).toString('base64url'));
  const presented = Buffer.from(given);
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return null;
  if (Number(expires) <= nowSeconds) return null;
  return userId;
}

/** The value of one cookie in a `Cookie` header (`a=1; b=2`), or null. */
export function readCookie(header: string | undefined, name: string): string | null {
  if (!header) return null;
  for (const pair of header.split(';')) {
    const eq = pair.indexOf('=');
    if (eq < 0) continue;
    if (pair.slice(0, eq).trim() !== name) continue;
    let value = pair.slice(eq + 1).trim();
    if (value.startsWith('"') && value.endsWith('"') && value.length >= 2) value = value.slice(1, -1);
    return value;
  }
  return null;
}

/** `Set-Cookie` attributes a web front end should use when it hands the session to a browser. */
export function sessionSetCookie(value: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; Secure; SameSite=Strict`;
}
