import { api } from './client.js';
import { API_PATHS } from './generated/paths.js';

/** Who is signed in, as far as the console can tell. */
export type Session = { state: 'loading' } | { state: 'signed-out' } | { state: 'signed-in'; login: string | null };

/**
 * Who is signed in: GET /v1/session once the gateway has it, else whether the cheapest
 * authenticated read (one thread of the work list) is refused. Only a 401 means signed out; any
 * other failure is thrown, for the page to say the gateway is unwell rather than ask for a sign-in.
 */
export async function fetchSession(signal: AbortSignal): Promise<Session> {
  if (API_PATHS.includes('/v1/session')) {
    // Raw fetch, read loosely: typed once the endpoint is in the document this console is built with.
    const res = await fetch('/v1/session', { credentials: 'same-origin', signal });
    if (res.status === 401) return { state: 'signed-out' };
    if (!res.ok) throw new Error(`GET /v1/session: ${res.status}`);
    const body: unknown = await res.json();
    return { state: 'signed-in', login: loginOf(body) ?? loginOf((body as { user?: unknown } | null)?.user) };
  }
  const { response } = await api.GET('/v1/work', { params: { query: { limit: 1 } }, signal });
  if (response.status === 401) return { state: 'signed-out' };
  if (!response.ok) throw new Error(`GET /v1/work: ${response.status}`);
  return { state: 'signed-in', login: null };
}

function loginOf(value: unknown): string | null {
  const login = (value as { login?: unknown } | null)?.login;
  return typeof login === 'string' && login !== '' ? login : null;
}
