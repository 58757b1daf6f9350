import { api, problemOf } from './client.js';

/** Who is signed in, as far as the console can tell. */
export type Session = { state: 'loading' } | { state: 'signed-out' } | { state: 'signed-in'; login: string };

/**
 * Who is signed in (GET /v1/session). Only a 401 means signed out; any other failure is thrown,
 * for the page to say the gateway is unwell rather than ask for a sign-in.
 */
export async function fetchSession(signal: AbortSignal): Promise<Session> {
  const { data, response } = await api.GET('/v1/session', { signal });
  if (response.status === 401) return { state: 'signed-out' };
  if (!data) throw new Error(`GET /v1/session: ${response.status}`);
  return { state: 'signed-in', login: data.user.login };
}

/**
 * Sign out (POST /v1/auth/logout): ends every session of the user, in every browser. A 401 means
 * the session had ended already, which is as good. Anything else is thrown with what the gateway said.
 */
export async function signOut(): Promise<void> {
  const { response, error } = await api.POST('/v1/auth/logout');
  if (response.status === 204 || response.status === 401) return;
  throw new Error(problemOf(error, response));
}
