import {
  ApiKeyList,
  CreateApiKeyBody,
  CreatedApiKey,
  ErrorBody,
  IdParam,
  MAX_ACTIVE_API_KEYS_PER_USER,
  type ApiKey,
} from '@threadwork/contracts';
import { notFound } from '@threadwork/platform';
import { z } from 'zod';
import { DEFAULT_KEY_NAME, type ApiKeyDoc } from '../store/identity.js';
import { announceRevocation } from '../store/revocations.js';
import { sendError } from '../http/errors.js';
import type { RoutePlugin } from './deps.js';
import { readErrors, writeErrors } from './error-responses.js';
import { ownerOf } from './parse.js';

/** The one shape a key leaves the gateway in: no hash, no key. */
function apiKeyView(doc: ApiKeyDoc): ApiKey {
  return {
    id: doc._id,
    name: doc.name ?? DEFAULT_KEY_NAME,
    prefix: doc.prefix,
    created_at: doc.created_at.toISOString(),
    last_used_at: doc.last_used_at?.toISOString() ?? null,
    revoked_at: doc.revoked_at?.toISOString() ?? null,
  };
}

const SESSION_ONLY_MESSAGE = 'API keys are managed from a signed-in browser session; a key cannot mint keys';
const sessionOnly = {
  403: ErrorBody.describe('`forbidden`: the request carried an API key; these routes take a browser session only'),
};
const tooManyKeys = {
  409: ErrorBody.describe(
    `\`too_many_api_keys\`: the caller already has ${MAX_ACTIVE_API_KEYS_PER_USER} active keys; nothing was written`,
  ),
};
/** Documented as cookie-only: a bearer key is refused here even when valid. */
const security = [{ session: [] }];
const tags = ['settings'];

/**
 * The signed-in user's own API keys. Only a browser session may list, create or revoke them: a
 * leaked key must not be able to mint itself successors or revoke its owner's other keys. The
 * cookie's CSRF guard (http/auth.ts) covers the writes as it covers every other.
 */
export const apiKeyRoutes: RoutePlugin = async (app, deps) => {
  // Encapsulated: runs for these routes only, after authentication has said how the caller came.
  app.addHook('onRequest', async (request, reply) => {
    if (request.via !== 'session') await sendError(reply, 403, 'forbidden', SESSION_ONLY_MESSAGE);
  });

  app.get(
    '/v1/keys',
    {
      schema: {
        summary: "List the signed-in user's API keys (never the keys themselves)",
        tags,
        security,
        response: { 200: ApiKeyList, ...readErrors, ...sessionOnly },
      },
    },
    async (request) => {
      const keys = await deps.identity.listKeys(ownerOf(request));
      return { keys: keys.map(apiKeyView) };
    },
  );

  app.post(
    '/v1/keys',
    {
      schema: {
        summary: 'Create an API key for the signed-in user; the key is in this answer only',
        description: `At most ${MAX_ACTIVE_API_KEYS_PER_USER} keys may be active at once (409 \`too_many_api_keys\` past it). Store \`key\` now: only a hash of it is kept.`,
        tags,
        security,
        body: CreateApiKeyBody,
        response: { 201: CreatedApiKey, ...writeErrors, ...sessionOnly, ...tooManyKeys },
      },
    },
    async (request, reply) => {
      const { key, doc } = await deps.identity.createKey(ownerOf(request), {
        name: request.body.name,
        maxActive: MAX_ACTIVE_API_KEYS_PER_USER,
      });
      request.log.info({ key_id: doc._id }, 'API key created');
      return reply.code(201).send({ api_key: apiKeyView(doc), key });
    },
  );

  app.delete(
    '/v1/keys/:id',
    {
      schema: {
        summary: "Revoke one of the signed-in user's API keys, on every gateway at once",
        description: "Revoking a key already revoked answers 204 again. Another user's key is 404.",
        tags,
        security,
        params: IdParam,
        response: { 204: z.null().describe('Revoked (now or before)'), ...readErrors, ...sessionOnly },
      },
    },
    async (request, reply) => {
      const doc = await deps.identity.revokeOwnKey(ownerOf(request), request.params.id);
      if (!doc) throw notFound('API key');
      // Every replica forgets the keys it remembers. Also on a repeat: it may follow an
      // announcement that was lost. Without it a remembered key lives on for AUTH_CACHE_TTL_MS.
      await announceRevocation(deps.nc).catch((err: unknown) =>
        request.log.warn(
          { err },
          'the revocation could not be announced; other gateways refuse the key within AUTH_CACHE_TTL_MS',
        ),
      );
      request.log.info({ key_id: doc._id }, 'API key revoked');
      return reply.code(204).send(null);
    },
  );
};
