import { LoginQuery, SessionInfo, UnauthorizedBody } from '@threadwork/contracts';
import { AppError } from '@threadwork/platform';
import { z } from 'zod';
import { LOGIN_PATH } from '../domain/login-links.js';
import { clearSessionCookie, sameOriginPath, sessionSetCookie, signSession } from '../domain/session.js';
import { sessionEpochOf } from '../store/identity.js';
import type { RoutePlugin } from './deps.js';
import { readErrors, tooManyFromAddress, writeErrors } from './error-responses.js';
import { ownerOf } from './parse.js';

/**
 * The browser's side of authentication: who is signed in, a one-time login link that becomes a
 * `tw_session` cookie, and signing out. The link is the only public path here; GET never changes
 * anything but the spent link (a SameSite=Lax cookie rides along on any top-level navigation).
 */
export const sessionRoutes: RoutePlugin = async (app, deps) => {
  app.get(
    '/v1/session',
    {
      schema: {
        summary: 'Who is signed in, and whether by session cookie or API key',
        tags: ['session'],
        response: { 200: SessionInfo, ...readErrors },
      },
    },
    async (request) => {
      const { user, via } = request;
      if (!user || !via) throw new AppError('unauthorized', 'Unauthorized');
      return { user: { id: user._id, login: user.login }, via };
    },
  );

  app.get(
    LOGIN_PATH,
    {
      schema: {
        summary: 'Sign in with a one-time login link: sets the session cookie and redirects',
        description: [
          'Opened by a browser from a link printed by `npm run admin -- login-link --user <login>` (and by `npm start` when the stack is ready). Unauthenticated: the code is the proof. It works once, before it expires (15 minutes by default), on whichever replica sees it first.',
          '',
          `Answers 302 to \`next\` (a path on this origin; anything else, \`//host\` and \`/\\\\host\` included, becomes \`/\`) with \`Set-Cookie: tw_session=…; HttpOnly; Path=/; SameSite=Lax\`, plus \`Secure\` when the request came over TLS (directly or through a proxy trusted by TRUST_PROXY). An unknown, used or expired code is 401. Rate-limited per client address.`,
        ].join('\n'),
        tags: ['session'],
        security: [],
        querystring: LoginQuery,
        response: {
          302: z.null().describe('Signed in: redirect to `next` with the session cookie set'),
          400: readErrors[400],
          401: UnauthorizedBody.describe('The link is unknown, already used or expired'),
          429: tooManyFromAddress,
          500: readErrors[500],
          503: readErrors[503],
        },
      },
    },
    async (request, reply) => {
      const user = await deps.identity.redeemLoginLink(request.query.code);
      if (!user) return reply.code(401).send({ error: 'Unauthorized' as const });
      const expiresAt = Math.floor(Date.now() / 1000) + deps.sessionTtlSeconds;
      const value = signSession(user._id, expiresAt, deps.sessionSecret, sessionEpochOf(user));
      return reply
        .header('set-cookie', sessionSetCookie(value, deps.sessionTtlSeconds, request.protocol === 'https'))
        .header('cache-control', 'no-store')
        .header('referrer-policy', 'no-referrer')
        .redirect(sameOriginPath(request.query.next), 302);
    },
  );

  app.post(
    '/v1/auth/logout',
    {
      schema: {
        summary: "Sign out: end every session of the caller's user and clear the cookie",
        description:
          'Session cookie only (an API key is 400 `invalid_request`; revoke keys with the admin CLI). Ends every session of the user, in every browser and on every replica, and answers with the cookie cleared. API keys keep working. Like every cookie-authenticated write, refused (401) from another origin.',
        tags: ['session'],
        response: { 204: z.null().describe('Signed out'), ...writeErrors },
      },
    },
    async (request, reply) => {
      if (request.via !== 'session') {
        throw new AppError(
          'invalid_request',
          'headers.authorization: signing out ends browser sessions; send the tw_session cookie, not an API key',
        );
      }
      await deps.identity.endSessions(ownerOf(request));
      return reply
        .header('set-cookie', clearSessionCookie(request.protocol === 'https'))
        .code(204)
        .send(null);
    },
  );
};
