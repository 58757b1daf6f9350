import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

// Browser sessions: `tw_session=<user_id>.<epoch>.<expires epoch s>.<HMAC-SHA256 base64url>`. The
// cookie carries everything needed to check it, so no session table exists. `epoch` is the user's
// session epoch when it was signed: signing out raises the user's epoch, which ends every cookie
// signed before, on every replica (auth looks the user up on each request anyway). The older
// three-part form (no epoch) is refused, so cookies issued before epochs existed stop working.

export const SESSION_COOKIE = 'tw_session';
/** Generated secrets are this many random bytes, base64url-encoded. */
const GENERATED_SECRET_BYTES = 32;
/** User ids are `usr_<hex>`; anything with a `.` would make the cookie ambiguous. */
const USER_ID_PATTERN = /^[A-Za-z0-9_-]{1,256}$/;
const NUMBER_PATTERN = /^[0-9]{1,12}$/;

/** What a valid session cookie says. */
export interface SessionClaims {
  userId: string;
  /** The user's session epoch when the cookie was signed; it counts only while it is still the user's. */
  epoch: number;
}

export function generateSessionSecret(): string {
  return randomBytes(GENERATED_SECRET_BYTES).toString('base64url');
}

function signature(payload: string, secret: string): Buffer {
  return createHmac('sha256', secret).update(payload).digest();
}

/**
 * The cookie value of a session for `userId` at session epoch `epoch` (the user's current one, or
 * the cookie is refused) that expires at `expiresAt` (epoch seconds).
 */
export function signSession(userId: string, expiresAt: number, secret: string, epoch = 0): string {
  if (!USER_ID_PATTERN.test(userId)) throw new RangeError(`cannot put user id ${JSON.stringify(userId)} in a session`);
  if (!Number.isInteger(expiresAt) || expiresAt < 0) throw new RangeError(`bad session expiry ${expiresAt}`);
  if (!Number.isSafeInteger(epoch) || epoch < 0) throw new RangeError(`bad session epoch ${epoch}`);
  const payload = `${userId}.${epoch}.${expiresAt}`;
  return `${payload}.${signature(payload, secret).toString('base64url')}`;
}

/**
 * The claims of a well-formed, correctly signed, unexpired session value, else null. The
 * signature is compared in constant time; expiry is checked only after it, so a forged cookie
 * learns nothing from the answer. Whether the epoch is still the user's is the caller's to check.
 */
export function verifySession(value: string, secret: string, nowSeconds: number): SessionClaims | null {
  const parts = value.split('.');
  if (parts.length !== 4) return null;
  const [userId, epoch, expires, given] = parts as [string, string, string, string];
  if (!USER_ID_PATTERN.test(userId) || !NUMBER_PATTERN.test(epoch) || !NUMBER_PATTERN.test(expires)) return null;
  // Compared as text, not decoded bytes: base64url decoding ignores the spare bits of the last
  // character, so several strings decode to the same signature; only the canonical one is valid.
  const expected = Buffer.from(signature(`${userId}.${epoch}.${expires}`, secret).toString('base64url'));
  const presented = Buffer.from(given);
  if (presented.length !== expected.length || !timingSafeEqual(presented, expected)) return null;
  if (Number(expires) <= nowSeconds) return null;
  return { userId, epoch: Number(epoch) };
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

/**
 * The `Set-Cookie` value that hands a session to a browser. SameSite=Lax, not Strict: a login link
 * opened from a mail or a chat is a cross-site navigation, and the console it lands on must be
 * signed in. Lax still keeps the cookie off cross-site writes, and auth refuses a cookie write whose
 * Sec-Fetch-Site is not same-origin. `Secure` when the request came over TLS: a plain-HTTP local
 * stack could not keep a Secure cookie at all.
 */
export function sessionSetCookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${value}; Max-Age=${maxAgeSeconds}; HttpOnly; Path=/; SameSite=Lax${secure ? '; Secure' : ''}`;
}

/** The `Set-Cookie` value that makes a browser forget its session. */
export function clearSessionCookie(secure: boolean): string {
  return sessionSetCookie('', 0, secure);
}

/**
 * Where a login may send the browser: a path on this origin (`/…`, not `//host` nor `/\host`,
 * which browsers read as another host), else `/`. Nothing that could leave the origin passes.
 */
export function sameOriginPath(next: string | undefined): string {
  if (next === undefined || next.length > 2048) return '/';
  if (!next.startsWith('/') || next.startsWith('//')) return '/';
  // Control characters and backslashes are dropped or turned into `/` by URL parsers, so
  // `/<tab>/evil.com` and `/\evil.com` would both lead to evil.com.
  for (const char of next) {
    const code = char.charCodeAt(0);
    if (char === '\\' || code < 0x20 || code === 0x7f) return '/';
  }
  return next;
}
