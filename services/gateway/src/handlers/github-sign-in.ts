import { AuthProviders, GitHubCallbackQuery, UnauthorizedBody, rpc } from '@threadwork/contracts';
import { AppError } from '@threadwork/platform';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  AUTH_PROVIDERS_PATH,
  clearStateCookie,
  GITHUB_CALLBACK_PATH,
  GITHUB_SIGN_IN_PATH,
  hashState,
  maySignIn,
  STATE_COOKIE,
  stateMatchesCookie,
  stateSetCookie,
  withState,
} from '../domain/github-sign-in.js';
import { readCookie, sessionSetCookie, signSession } from '../domain/session.js';
import { sessionEpochOf, type UserDoc } from '../store/identity.js';
import type { RoutePlugin } from './deps.js';
import { readErrors, tooManyFromAddress } from './error-responses.js';

/** Why a callback was refused, for the log (the browser only sees 401). */
type Refusal =
  | 'state_not_this_browsers'
  | 'state_unknown_used_or_expired'
  | 'declined_at_github'
  | 'code_refused'
  | 'not_in_github_sign_in_allow';

/**
 * Sign in with GitHub: the GitHub App's OAuth web flow, with repohost holding the client (its
 * secret never reaches the gateway). `GET /v1/auth/github` starts it with a state bound to this
 * browser; GitHub sends the browser back to the callback, which checks the state, has repohost
 * exchange the code for who the GitHub user is, and signs the browser in as the Threadwork user of
 * that GitHub user (made on the first sign-in) with the same `tw_session` cookie as a login link.
 */
export const githubSignInRoutes: RoutePlugin = async (app, deps) => {
  const oauthClient = () => deps.services.request(rpc.repohost.oauthClient, {});
  app.get(
    AUTH_PROVIDERS_PATH,
    {
      schema: {
        summary: 'The ways to sign in that this deployment offers',
        description:
          'Unauthenticated, for the signed-out page: `github` is true when `GET /v1/auth/github` works (repohost has the GitHub App with its OAuth client and PUBLIC_BASE_URL).',
        tags: ['session'],
        security: [],
        response: { 200: AuthProviders, 429: tooManyFromAddress, 500: readErrors[500], 503: readErrors[503] },
      },
    },
    async (_request, reply) => {
      const offered = deps.githubSignInAllow !== null && (await oauthClient()) !== null;
      return reply.header('cache-control', 'no-store').send({ github: offered });
    },
  );

  app.get(
    GITHUB_SIGN_IN_PATH,
    {
      schema: {
        summary: 'Sign in with GitHub: redirects to GitHub to authorize',
        description: [
          "Unauthenticated. Answers 302 to GitHub's `/login/oauth/authorize` with the app's `client_id`, `redirect_uri` = `<PUBLIC_BASE_URL>/v1/auth/github/callback` and a random `state` that works once, for 10 minutes, and only in this browser: its SHA-256 is stored and set in the cookie `tw_github_state` (`HttpOnly; Path=/v1/auth/github; SameSite=Lax`, `Secure` over TLS).",
          '',
          'Without an OAuth client configured: 404 `not_found` (`GET /v1/auth/providers` says `github: false`). Rate-limited per client address.',
        ].join('\n'),
        tags: ['session'],
        security: [],
        response: {
          302: z.null().describe("Redirect to GitHub's authorize page, with the state cookie set"),
          404: readErrors[404].describe('Sign-in with GitHub is not configured'),
          429: tooManyFromAddress,
          500: readErrors[500],
          503: readErrors[503],
        },
      },
    },
    async (request, reply) => {
      const client = deps.githubSignInAllow === null ? null : await oauthClient();
      if (client === null) throw new AppError('not_found', 'sign-in with GitHub is not configured');
      const state = await deps.identity.createGitHubState();
      return reply
        .header('set-cookie', stateSetCookie(hashState(state), request.protocol === 'https'))
        .header('cache-control', 'no-store')
        .header('referrer-policy', 'no-referrer')
        .redirect(withState(client.authorize_url, state), 302);
    },
  );

  app.get(
    GITHUB_CALLBACK_PATH,
    {
      schema: {
        summary: 'Where GitHub sends the browser back: signs in and redirects to the console',
        description: [
          "Unauthenticated: the `state` and this browser's `tw_github_state` cookie are the proof. The state must hash to the cookie (a state from another browser's sign-in is refused: login CSRF), be known, unexpired and unused (it is spent on the first callback that gets this far). Then repohost exchanges `code` with GitHub and reads the GitHub user; the Threadwork user of that GitHub user (by GitHub's numeric id; made on the first sign-in with login `github:<login>`, kept up to date on later ones) is signed in.",
          '',
          'Answers 302 to `/` with `Set-Cookie: tw_session=…` (as `GET /v1/auth/link` does) and the state cookie cleared. A bad, expired, reused or foreign state, a sign-in declined at GitHub, or a code GitHub refuses is 401 `{error: "Unauthorized"}` (logged with the request id and the reason). GitHub not answering is 503. Rate-limited per client address.',
        ].join('\n'),
        tags: ['session'],
        security: [],
        querystring: GitHubCallbackQuery,
        response: {
          302: z.null().describe('Signed in: redirect to the console with the session cookie set'),
          400: readErrors[400],
          401: UnauthorizedBody.describe(
            'The state is not this browser’s, unknown, used or expired, or GitHub refused',
          ),
          404: readErrors[404].describe('Sign-in with GitHub is not configured'),
          429: tooManyFromAddress,
          500: readErrors[500],
          503: readErrors[503],
        },
      },
    },
    async (request, reply) => {
      const allow = deps.githubSignInAllow;
      if (allow === null) throw new AppError('not_found', 'sign-in with GitHub is not configured');
      const secure = request.protocol === 'https';
      // Whatever happens, this browser's pending sign-in is over.
      reply.header('set-cookie', clearStateCookie(secure)).header('cache-control', 'no-store');
      const { code, state, error } = request.query;
      const refuse = (reason: Refusal) => {
        request.log.warn({ reason, github_error: error }, 'sign-in with GitHub refused');
        return reply.code(401).send({ error: 'Unauthorized' as const });
      };
      if (!stateMatchesCookie(state, readCookie(request.headers.cookie, STATE_COOKIE))) {
        return refuse('state_not_this_browsers');
      }
      if (!(await deps.identity.consumeGitHubState(state!))) return refuse('state_unknown_used_or_expired');
      if (code === undefined) return refuse('declined_at_github');
      let githubUser: { id: number; login: string };
      try {
        ({ github_user: githubUser } = await deps.services.request(rpc.repohost.oauthUser, { code }));
      } catch (err) {
        if (err instanceof AppError && err.code === 'invalid_request') return refuse('code_refused');
        throw err;
      }
      // Before any user is made: a GitHub account is not by itself a right to this deployment.
      if (!maySignIn(allow, githubUser)) {
        request.log.warn(
          { github_id: githubUser.id, github_login: githubUser.login },
          'GitHub user not allowed to sign in',
        );
        return refuse('not_in_github_sign_in_allow');
      }
      const user = await deps.identity.signInWithGitHub(githubUser);
      request.log.info({ user_id: user._id, github_id: githubUser.id }, 'signed in with GitHub');
      return signIn(request, reply, deps, user);
    },
  );
};

/** The `tw_session` cookie for the user, as a login link sets it, and the way to the console. */
function signIn(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: { sessionSecret: string; sessionTtlSeconds: number },
  user: UserDoc,
) {
  const expiresAt = Math.floor(Date.now() / 1000) + deps.sessionTtlSeconds;
  const value = signSession(user._id, expiresAt, deps.sessionSecret, sessionEpochOf(user));
  // fastify adds a second Set-Cookie rather than replacing the one that clears the state.
  return reply
    .header('set-cookie', sessionSetCookie(value, deps.sessionTtlSeconds, request.protocol === 'https'))
    .header('referrer-policy', 'no-referrer')
    .redirect('/', 302);
}
