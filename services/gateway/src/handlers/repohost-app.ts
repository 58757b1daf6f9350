import {
  ErrorBody,
  InstallSession,
  InstallSessionRequest,
  LinkedInstallation,
  LinkInstallationRequest,
  SetupQuery,
  WebhookResponse,
  rpc,
} from '@threadwork/contracts';
import { AppError, verifyWebhookSignature } from '@threadwork/platform';
import { z } from 'zod';
import type { RoutePlugin } from './deps.js';
import { readErrors, tooManyFromAddress, writeErrors } from './error-responses.js';
import { ownerOf } from './parse.js';

/** GitHub's largest webhook payload. */
export const WEBHOOK_BODY_LIMIT = 25 * 1024 * 1024;
/** Room for the JSON envelope around the base64 body in the NATS message to repohost. */
const ENVELOPE_BYTES = 4096;

/** GitHub adds `code` to the setup redirect when the app asks for user authorization during installation. */
const SetupCallbackQuery = SetupQuery.extend({ code: z.string().min(1).max(512).optional() });

const WebhookHeaders = z.object({
  'x-github-event': z.string().min(1).max(256),
  'x-github-delivery': z.string().min(1).max(256),
  'x-hub-signature-256': z.string().max(512).optional(),
  'content-type': z.string().max(256).optional(),
});

const unauthorized = z.object({ error: z.literal('Unauthorized') });

/**
 * The GitHub App's install flow and webhooks: an install session for the caller, GitHub's setup
 * callback (unauthenticated: the session's `state` is the proof; it links nothing, it hands a
 * one-time code back to the app), the code's redemption by the session's owner with its PKCE
 * verifier, and webhook deliveries (unauthenticated: the signature is the proof).
 */
export const repohostAppRoutes: RoutePlugin = async (app, deps) => {
  app.post(
    '/v1/repohost/install-session',
    {
      schema: {
        summary: 'Start installing the GitHub App: a short-lived, single-use install URL',
        description: [
          "`return_to` must be exactly the native app's `<app scheme>://repohost/setup`, or the web console's own setup page `<PUBLIC_BASE_URL>/settings/github` (repohost's PUBLIC_BASE_URL, the gateway's public origin; only when it is configured). Nothing else, compared as written: no other origin, path, query or fragment. `code_challenge` is required: base64url(SHA-256(code_verifier)) without padding (PKCE S256, RFC 7636), where `code_verifier` is a random secret of 43 to 128 characters the client keeps; a request without it is 400 `invalid_request` naming `body.code_challenge`.",
          '',
          'After installing, the browser comes back to `return_to` with `outcome`: `installed` (with `installation_id` and a one-time `code`), `requested` (an organisation member asked an owner to install; nothing to link) or `error` (with `error`). Nothing is linked yet: redeem `code` with `POST /v1/repohost/installations` and the verifier, as this same caller, before it expires.',
        ].join('\n'),
        tags: ['repohost'],
        body: InstallSessionRequest,
        response: { 201: InstallSession, ...writeErrors },
      },
    },
    async (request, reply) => {
      const session = await deps.services.request(rpc.repohost.installSession, {
        owner_id: ownerOf(request),
        return_to: request.body.return_to,
        code_challenge: request.body.code_challenge,
      });
      return reply.code(201).send(session);
    },
  );

  app.post(
    '/v1/repohost/installations',
    {
      schema: {
        summary: "Link an installation: redeem the setup callback's one-time code",
        description: [
          "Redeems the `code` the setup callback handed to the install session's `return_to`, with the `code_verifier` behind the session's `code_challenge`. Only the caller who created the install session can redeem it, once, before it expires (`INSTALL_LINK_CODE_TTL_MS`, 5 minutes by default).",
          '',
          'With the OAuth client configured (always in production), the GitHub user who completed the setup must be able to see the installation, and must be the GitHub user this caller is verified as: the first link verifies the caller as that GitHub user, and a GitHub user is verified for one caller only. Refusals are 400 `invalid_request` naming `body.code` or `body.code_verifier`; nothing is linked.',
        ].join('\n'),
        tags: ['repohost'],
        body: LinkInstallationRequest,
        response: { 201: LinkedInstallation.describe('Linked to the caller'), ...writeErrors },
      },
    },
    async (request, reply) => {
      const linked = await deps.services.request(rpc.repohost.link, { owner_id: ownerOf(request), ...request.body });
      return reply.code(201).send(linked);
    },
  );

  app.get(
    '/v1/repohost/setup',
    {
      schema: {
        summary: 'GitHub App setup callback: hands a one-time link code back to the app',
        description:
          "GitHub redirects here after an installation. Unauthenticated: the install session's `state` is the proof and is consumed once. Links nothing by itself: answers 302 to the session's `return_to` with `outcome=installed`, `installation_id` and a one-time `code` that only the session's creator can redeem (`POST /v1/repohost/installations`, with its PKCE verifier); or `outcome=requested`; or `outcome=error` with `error` (`invalid_state`, `missing_installation`, `installation_not_found`, `unverified_installation`, `not_installation_admin` (the GitHub user who came back does not administer the installation's account: neither that user nor an admin of that organisation), `github_account_mismatch`, `github_unavailable`). Rate-limited per client address.",
        tags: ['repohost'],
        security: [],
        querystring: SetupCallbackQuery,
        response: {
          302: z.null().describe("Redirect to the session's return_to with the outcome"),
          400: readErrors[400],
          429: tooManyFromAddress,
          500: readErrors[500],
          503: readErrors[503],
        },
      },
    },
    async (request, reply) => {
      const { installation_id, setup_action, state, code } = request.query;
      const { redirect_to } = await deps.services.request(rpc.repohost.setup, {
        state,
        ...(installation_id === undefined ? {} : { installation_id }),
        ...(setup_action === undefined ? {} : { setup_action }),
        ...(code === undefined ? {} : { code }),
      });
      return reply.redirect(redirect_to, 302);
    },
  );
};

/** The largest body one NATS message of `maxPayload` bytes carries base64-encoded to repohost. */
export const forwardableBytes = (maxPayload: number) => Math.floor(((maxPayload - ENVELOPE_BYTES) * 3) / 4);

/**
 * A plugin of its own (its own scope) so that only this route takes any content type as raw bytes (the
 * signature covers them exactly), and no more of them than one NATS message can forward (GitHub
 * sends up to 25 MiB): a larger body is refused while it arrives, never held whole. The per-address
 * limit has been taken before the body is read (http/rate-limit.ts); the signature is checked before
 * anything is sent on NATS.
 */
export const webhookRoutes: RoutePlugin = async (scope, deps) => {
  const bodyLimit = Math.min(WEBHOOK_BODY_LIMIT, forwardableBytes(deps.nc.info?.max_payload ?? 1024 * 1024));
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_request, body, done) => done(null, body));
  scope.post(
    '/v1/repohost/webhooks',
    {
      bodyLimit,
      schema: {
        summary: 'GitHub App webhook deliveries',
        description: [
          'Unauthenticated: `X-Hub-Signature-256` (HMAC-SHA256 of the raw body with the webhook secret) is the proof, checked by the gateway before the delivery goes anywhere (and again by repohost); a bad or missing one is 401 and nothing is processed.',
          '',
          "GitHub signs the body only, so what the signature cannot bind is bound otherwise: a signed body is tied to the `X-GitHub-Delivery` that first brought it (for the 14 days deliveries are remembered), and the same body under another delivery id is a replay, refused with 401; `X-GitHub-Event` must agree with the payload where that is unambiguous (400 otherwise). Each delivery id is processed once (a repeat answers `duplicate`, as GitHub's own redeliveries do). Processing happens after the answer.",
          '',
          'The body is refused with 413 as it arrives once it is larger than one NATS message can forward. Requests are limited per client address (429 with `Retry-After`); an accepted delivery gives its token back.',
        ].join('\n'),
        tags: ['repohost'],
        security: [],
        headers: WebhookHeaders,
        response: {
          202: WebhookResponse,
          400: readErrors[400],
          401: unauthorized.describe('Signature missing or wrong, or a signed body replayed under another delivery id'),
          413: ErrorBody.describe('Delivery larger than this deployment can forward (NATS max_payload)'),
          429: tooManyFromAddress,
          500: readErrors[500],
          503: readErrors[503],
        },
      },
    },
    async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const headers = request.headers as z.infer<typeof WebhookHeaders>;
      // Nothing unproven goes on NATS: repohost checks again, but never has to hear a forgery.
      if (!deps.webhookSecret || !verifyWebhookSignature(deps.webhookSecret, body, headers['x-hub-signature-256'])) {
        throw new AppError('unauthorized', 'webhook signature missing or wrong');
      }
      const encoded = body.toString('base64');
      // The delivery travels to repohost in one NATS message; a server reached since may allow less.
      const maxPayload = deps.nc.info?.max_payload ?? 1024 * 1024;
      if (encoded.length + ENVELOPE_BYTES > maxPayload) {
        throw new AppError('payload_too_large', `request body is larger than ${forwardableBytes(maxPayload)} bytes`);
      }
      const result = await deps.services.request(rpc.repohost.webhook, {
        event: headers['x-github-event'],
        delivery: headers['x-github-delivery'],
        ...(headers['x-hub-signature-256'] === undefined ? {} : { signature: headers['x-hub-signature-256'] }),
        ...(headers['content-type'] === undefined ? {} : { content_type: headers['content-type'] }),
        body_base64: encoded,
      });
      // GitHub's deliveries are not what the per-address limit is for: a new one gives its token back.
      if (result.status === 'accepted') deps.refundAddress(request);
      return reply.code(202).send(result);
    },
  );
};
