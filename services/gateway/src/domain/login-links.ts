import { createHash, randomBytes } from 'node:crypto';

// One-time login links: `<origin>/v1/auth/link?code=<token>`. The token is 32 random bytes; the
// gateway's database keeps only its SHA-256 (a leaked database signs no one in), with its user,
// expiry and when it was used. Redeeming inserts the link's use under the link's id, so exactly
// one redemption wins however many replicas see it at once (store/login-links.ts).

const TOKEN_BYTES = 32;
/** base64url of TOKEN_BYTES bytes. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

/** How long a link lives unless told otherwise, and the bounds of what may be asked. */
export const LOGIN_LINK_MINUTES = { default: 15, min: 1, max: 1440 } as const;

export const LOGIN_PATH = '/v1/auth/link';

export function generateLoginToken(): string {
  return randomBytes(TOKEN_BYTES).toString('base64url');
}

export function isWellFormedLoginToken(token: string): boolean {
  return TOKEN_PATTERN.test(token);
}

/** What the database keeps of a token. */
export function hashLoginToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** The link a user opens; `origin` is the gateway's scheme, host and port as the browser reaches it. */
export function loginUrl(origin: string, token: string): string {
  const url = new URL(LOGIN_PATH, origin);
  url.searchParams.set('code', token);
  return url.toString();
}
