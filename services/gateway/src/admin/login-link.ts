import { LOGIN_LINK_MINUTES, loginUrl } from '../domain/login-links.js';
import { fail } from './fail.js';

/** Where the local stack's gateway listens; a deployed one is named with --origin. */
const DEFAULT_ORIGIN = 'http://localhost:8080';

export interface LoginLinkOptions {
  login: string;
  minutes: number;
  /** The link of a token, at the origin the browser reaches the gateway on. */
  url(token: string): string;
}

/** `login-link`'s options, checked (a bad one stops the CLI before it touches the database). */
export function loginLinkOptions(values: { user?: string; minutes?: string; origin?: string }): LoginLinkOptions {
  if (!values.user) fail('admin: login-link needs --user <login>');
  const minutes = values.minutes === undefined ? LOGIN_LINK_MINUTES.default : Number(values.minutes);
  if (!Number.isInteger(minutes) || minutes < LOGIN_LINK_MINUTES.min || minutes > LOGIN_LINK_MINUTES.max) {
    fail(`admin: --minutes must be a whole number from ${LOGIN_LINK_MINUTES.min} to ${LOGIN_LINK_MINUTES.max}`);
  }
  const origin = values.origin ?? DEFAULT_ORIGIN;
  let parsed: URL;
  try {
    parsed = new URL(origin);
  } catch {
    fail(`admin: --origin ${JSON.stringify(origin)} is not a URL (expected e.g. https://threadwork.example.com)`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') fail('admin: --origin must be http:// or https://');
  return { login: values.user, minutes, url: (token) => loginUrl(parsed.origin, token) };
}
