import {
  ErrorBody,
  InstallSession,
  InstallSessionRequest,
  SetupQuery,
  WebhookResponse,
  rpc,
} from '@threadwork/contracts';
import { AppError } from '@threadwork/platform';
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { call, ownerOf, readErrors, writeErrors, type HandlerDeps, type RouteModule } from './common.js';

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
 * callback (unauthenticated: the session's `state` is the proof) and webhook deliveries
 * (unauthenticated: the signature is the proof, checked by repohost over the raw body).
 */
export const repohostAppRoutes: RouteModule = (app, deps) => {
  app.post(
    '/v1/repohost/install-session',
    {
      schema: {
        summary: 'Start installing the GitHub App: a short-lived, single-use install URL',
        description:
          '`return_to` must be exactly `<app scheme>://repohost/setup`; after installing, the browser comes back there with `outcome` (`installed`, `requested` or `error`), `installation_id` and, on error, `error`.',
        tags: ['repohost'],
        body: InstallSessionRequest,
        response: { 201: InstallSession, ...writeErrors },
      },
    },
    async (request, reply) => {
      const session = await call(deps, rpc.repohost.installSession, {
        owner_id: ownerOf(request),
        return_to: request.body.return_to,
      });
      return reply.code(201).send(session);
    },
  );

  app.get(
    '/v1/repohost/setup',
    {
      schema: {
        summary: 'GitHub App setup callback: links the installation and returns to the app',
        description:
          "GitHub redirects here after an installation. Unauthenticated: the install session's `state` is the proof and is consumed once. Answers 302 to the session's `return_to` with `outcome`, `installation_id` and (on error) `error`; an unknown, expired or used `state` links nothing.",
        tags: ['repohost'],
        security: [],
        querystring: SetupCallbackQuery,
        response: {
          302: z.null().describe("Redirect to the session's return_to with the outcome"),
          400: readErrors[400],
          500: readErrors[500],
          503: readErrors[503],
        },
      },
    },
    async (request, reply) => {
      const { installation_id, setup_action, state, code } = request.query;
      const { redirect_to } = await call(deps, rpc.repohost.setup, {
        state,
        ...(installation_id === undefined ? {} : { installation_id }),
        ...(setup_action === undefined ? {} : { setup_action }),
        ...(code === undefined ? {} : { code }),
      });
      return reply.redirect(redirect_to, 302);
    },
  );

  void app.register(async (scope) => webhookRoute(scope, deps));
};

/** The largest body one NATS message of `maxPayload` bytes carries base64-encoded to repohost. */
export const forwardableBytes = (maxPayload: number) => Math.floor(((maxPayload - ENVELOPE_BYTES) * 3) / 4);

/**
 * In a scope of its own so that only this route takes any content type as raw bytes (the
 * signature covers them exactly), and no more of them than one NATS message can forward (GitHub
 * sends up to 25 MiB): a larger body is refused while it arrives, never held whole.
 */
function webhookRoute(scope: FastifyInstance, deps: HandlerDeps): void {
  const bodyLimit = Math.min(WEBHOOK_BODY_LIMIT, forwardableBytes(deps.nc.info?.max_payload ?? 1024 * 1024));
  scope.removeAllContentTypeParsers();
  scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit }, (_request, body, done) => done(null, body));
  scope.withTypeProvider<ZodTypeProvider>().post(
    '/v1/repohost/webhooks',
    {
      bodyLimit,
      schema: {
        summary: 'GitHub App webhook deliveries',
        description:
          'Unauthenticated: `X-Hub-Signature-256` (HMAC-SHA256 of the raw body with the webhook secret) is the proof; a bad or missing one is 401 and nothing is processed. Each `X-GitHub-Delivery` is processed once (a repeat answers `duplicate`). Processing happens after the answer.',
        tags: ['repohost'],
        security: [],
        headers: WebhookHeaders,
        response: {
          202: WebhookResponse,
          400: readErrors[400],
          401: unauthorized.describe('Signature missing or wrong'),
          413: ErrorBody.describe('Delivery larger than this deployment can forward (NATS max_payload)'),
          500: readErrors[500],
          503: readErrors[503],
        },
      },
    },
    async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const encoded = body.toString('base64');
      // The delivery travels to repohost in one NATS message; a server reached since may allow less.
      const maxPayload = deps.nc.info?.max_payload ?? 1024 * 1024;
      if (encoded.length + ENVELOPE_BYTES > maxPayload) {
        throw new AppError('payload_too_large', `request body is larger than ${forwardableBytes(maxPayload)} bytes`);
      }
      const headers = request.headers as z.infer<typeof WebhookHeaders>;
      const result = await call(deps, rpc.repohost.webhook, {
        event: headers['x-github-event'],
        delivery: headers['x-github-delivery'],
        ...(headers['x-hub-signature-256'] === undefined ? {} : { signature: headers['x-hub-signature-256'] }),
        ...(headers['content-type'] === undefined ? {} : { content_type: headers['content-type'] }),
        body_base64: encoded,
      });
      return reply.code(202).send(result);
    },
  );
}
