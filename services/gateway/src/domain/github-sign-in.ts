import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

// Sign in with GitHub (the GitHub App's OAuth web flow). The gateway starts it with a `state` that
// works once, for a short while, and only in the browser that started it: the state's SHA-256 is
// both the stored record's id and the value of an http-only cookie set on that browser. The
// callback is refused unless the `state` GitHub sends back hashes to that browser's cookie (so a
// state from someone else's flow — login CSRF — is refused), and then unless its use can be
// inserted (so it works once, on whichever replica sees it first).

export const GITHUB_SIGN_IN_PATH = '/v1/auth/github';
export const GITHUB_CALLBACK_PATH = '/v1/auth/github/callback';
/** Which sign-in methods the console may offer; public, so the signed-out page can ask. */
export const AUTH_PROVIDERS_PATH = '/v1/auth/providers';

/**
 * Who may sign in with GitHub (GITHUB_SIGN_IN_ALLOW): anyone with a GitHub account (`*`), or the
 * GitHub users named, by login or by numeric id (an id outlives a rename). Checked on every sign-in.
 */
export interface SignInAllowList {
  anyone: boolean;
  ids: ReadonlySet<number>;
  /** Lowercase: GitHub logins are case-insensitive. */
  logins: ReadonlySet<string>;
}

/** GITHUB_LOGIN: what GitHub allows in a login (alphanumerics and single inner hyphens, ≤ 39). */
const GITHUB_LOGIN = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;

/**
 * Reads GITHUB_SIGN_IN_ALLOW: comma- or space-separated GitHub logins and numeric user ids, or `*`.
 * Empty is null: nobody may, and sign-in with GitHub is not offered. Anything else is an error.
 */
export function parseSignInAllow(value: string): SignInAllowList | null {
  const entries = value.split(/[\s,]+/).filter(Boolean);
  if (entries.length === 0) return null;
  const ids = new Set<number>();
  const logins = new Set<string>();
  let anyone = false;
  for (const entry of entries) {
    if (entry === '*') anyone = true;
    else if (/^[0-9]{1,15}$/.test(entry)) ids.add(Number(entry));
    else if (GITHUB_LOGIN.test(entry)) logins.add(entry.toLowerCase());
    else
      throw new Error(`GITHUB_SIGN_IN_ALLOW: ${JSON.stringify(entry)} is neither \`*\`, a GitHub login nor a user id`);
  }
  return { anyone, ids, logins };
}

export function maySignIn(allow: SignInAllowList, github: { id: number; login: string }): boolean {
  return allow.anyone || allow.ids.has(github.id) || allow.logins.has(github.login.toLowerCase());
}

/** Holds the hash of the browser's pending state; sent only to the callback (its path). */
export const STATE_COOKIE = 'tw_github_state';
/** How long a started sign-in may take at GitHub. */
export const STATE_TTL_SECONDS = 10 * 60;

const STATE_BYTES = 32;
/** base64url of STATE_BYTES bytes. */
const STATE_PATTERN = /^[A-Za-z0-9_-]{43}$/;
const HASH_PATTERN = /^[0-9a-f]{64}$/;

export function generateState(): string {
  return randomBytes(STATE_BYTES).toString('base64url');
}

export function isWellFormedState(state: string): boolean {
  return STATE_PATTERN.test(state);
}

/** What the database and the browser's cookie keep of a state. */
export function hashState(state: string): string {
  return createHash('sha256').update(state).digest('hex');
}

/** Is `state` the one whose hash this browser holds? Compared in constant time. */
export function stateMatchesCookie(state: string | undefined, cookie: string | null): boolean {
  if (state === undefined || cookie === null || !isWellFormedState(state) || !HASH_PATTERN.test(cookie)) return false;
  const expected = Buffer.from(hashState(state));
  const presented = Buffer.from(cookie);
  return presented.length === expected.length && timingSafeEqual(presented, expected);
}

/**
 * The cookie that binds a started sign-in to this browser: http-only, only for the sign-in paths,
 * SameSite=Lax so GitHub's redirect back (a top-level navigation from another site) carries it.
 */
export function stateSetCookie(hash: string, secure: boolean): string {
  return `${STATE_COOKIE}=${hash}; Max-Age=${STATE_TTL_SECONDS}; HttpOnly; Path=${GITHUB_SIGN_IN_PATH}; SameSite=Lax${secure ? '; Secure' : ''}`;
}

export function clearStateCookie(secure: boolean): string {
  return `${STATE_COOKIE}=; Max-Age=0; HttpOnly; Path=${GITHUB_SIGN_IN_PATH}; SameSite=Lax${secure ? '; Secure' : ''}`;
}

/** GitHub's authorize URL with our `state` added. */
export function withState(authorizeUrl: string, state: string): string {
  const url = new URL(authorizeUrl);
  url.searchParams.set('state', state);
  return url.href;
}

/**
 * The Threadwork login of a GitHub user: `github:<login>`. The prefix keeps GitHub's names apart
 * from the users the admin CLI makes (`alice` made by hand and GitHub's `alice` are two users,
 * never merged). When even that is taken — by a user the CLI was asked to call so, or by another
 * GitHub user who gave this login up and has not signed in since — the id makes it unique.
 */
export function githubLogin(github: { id: number; login: string }, taken = false): string {
  return taken ? `github:${github.login}#${github.id}` : `github:${github.login}`;
}
