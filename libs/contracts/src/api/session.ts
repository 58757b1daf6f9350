import { z } from 'zod';
import { Id } from '../common.js';

/** How the caller of a request proved who it is. */
export const AuthMethod = z
  .enum(['session', 'api_key'])
  .describe('How the caller authenticated: the `tw_session` cookie or an API key.');
export type AuthMethod = z.infer<typeof AuthMethod>;

/** GET /v1/session */
export const SessionInfo = z
  .object({
    user: z.object({ id: Id, login: Id }).describe('The user the request acts for.'),
    via: AuthMethod,
  })
  .describe('Who is signed in, and how.');
export type SessionInfo = z.infer<typeof SessionInfo>;

/** GET /v1/auth/link */
export const LoginQuery = z.object({
  code: z.string().min(1).max(256).describe('The one-time code of a login link (`npm run admin -- login-link`).'),
  next: z
    .string()
    .max(2048)
    .optional()
    .describe(
      'Where to go once signed in: a path on this origin starting with a single `/`; anything else lands on `/`.',
    ),
});
export type LoginQuery = z.infer<typeof LoginQuery>;
