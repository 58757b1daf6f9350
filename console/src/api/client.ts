import createClient from 'openapi-fetch';
import type { components, paths } from './generated/schema.js';

/**
 * The public API, typed from the gateway's OpenAPI document. Same origin as the console, so the
 * `tw_session` cookie goes with every request and no other site's page can use it.
 *
 * Writes: the gateway takes a cookie-authenticated POST or DELETE only when the browser says it
 * comes from the API's own origin (`Sec-Fetch-Site: same-origin`; `same-site` is refused). That
 * header is the browser's to set, never a script's, and it says `same-origin` exactly when the
 * request goes to the page's own origin. `mode: 'same-origin'` makes that hold for every request
 * of this client: the browser refuses to send one anywhere else, so no write of the console can
 * reach the gateway as a cross-origin request (refused 401) or carry the cookie elsewhere.
 */
export const api = createClient<paths>({
  baseUrl: window.location.origin,
  credentials: 'same-origin',
  mode: 'same-origin',
});

export type WorkList = components['schemas']['WorkList'];
export type Project = WorkList['projects'][number];
export type WorkThread = Project['threads'][number];

/**
 * What a refused request says, for the user: the contract's `{error: {code, message}}` message,
 * else the HTTP status (401's `{error: "Unauthorized"}` is handled by signing out, not shown).
 */
export function problemOf(error: unknown, response: Response): string {
  const body = (error as { error?: { message?: unknown } } | null | undefined)?.error;
  const message = typeof body === 'object' && body !== null ? body.message : undefined;
  return typeof message === 'string' && message !== '' ? message : `HTTP ${response.status}`;
}
