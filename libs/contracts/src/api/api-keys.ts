import { z } from 'zod';
import { Id, Timestamp } from '../common.js';

/** Active keys one user may hold at once; past it creating another is 409 `too_many_api_keys`. */
export const MAX_ACTIVE_API_KEYS_PER_USER = 20;

/**
 * One of the caller's API keys as the settings list it: never the key, never its hash. `prefix`
 * is the key's first characters, enough to tell which key a client holds.
 */
export const ApiKey = z
  .object({
    id: Id,
    name: z.string().describe('What the user called the key (`cli` for keys made by the admin CLI without one).'),
    prefix: z.string().describe('The first 12 characters of the key (`twk_` and 8 more), stored in clear.'),
    created_at: Timestamp,
    last_used_at: Timestamp.nullable().describe(
      'When the key last authenticated a request, to within about a minute; null if never.',
    ),
    revoked_at: Timestamp.nullable().describe('When the key was revoked; null while it is active.'),
  })
  .describe('An API key of the caller, without the key itself.');
export type ApiKey = z.infer<typeof ApiKey>;

/** GET /v1/keys */
export const ApiKeyList = z
  .object({ keys: z.array(ApiKey) })
  .describe("The caller's API keys, active and revoked, oldest first.");
export type ApiKeyList = z.infer<typeof ApiKeyList>;

/** POST /v1/keys */
export const CreateApiKeyBody = z
  .strictObject({
    name: z
      .string()
      .trim()
      .min(1)
      .max(100)
      .describe('What the key is for, to recognise it in the list later (1 to 100 characters).'),
  })
  .describe('A new API key for the caller.');
export type CreateApiKeyBody = z.infer<typeof CreateApiKeyBody>;

export const CreatedApiKey = z
  .object({
    api_key: ApiKey,
    key: z
      .string()
      .regex(/^twk_[0-9A-Za-z]{40}$/)
      .describe('The key itself (`Authorization: Bearer <key>`): shown this once, never again.'),
  })
  .describe('A new API key, with the key shown this once.');
export type CreatedApiKey = z.infer<typeof CreatedApiKey>;
