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

/** GET /v1/auth/providers */
export const AuthProviders = z
  .object({
    github: z
      .boolean()
      .describe('Whether `GET /v1/auth/github` signs in with GitHub here (the GitHub App has an OAuth client).'),
  })
  .describe('The ways to sign in that this deployment offers besides login links.');
export type AuthProviders = z.infer<typeof AuthProviders>;

/** GET /v1/auth/github/callback, GitHub's redirect back after the user authorized (or did not). */
export const GitHubCallbackQuery = z.object({
  code: z.string().min(1).max(512).optional().describe("GitHub's one-time code; absent when the user declined."),
  state: z.string().min(1).max(256).optional().describe('The state `GET /v1/auth/github` sent to GitHub.'),
  error: z.string().max(256).optional().describe("GitHub's reason when it sends no code (`access_denied`, …)."),
  error_description: z.string().max(1024).optional(),
  error_uri: z.string().max(2048).optional(),
});
export type GitHubCallbackQuery = z.infer<typeof GitHubCallbackQuery>;
