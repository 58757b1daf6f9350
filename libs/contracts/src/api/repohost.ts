import { z } from 'zod';
import { Id, Timestamp, optionalQueryParam } from '../common.js';
import { ConnectionStatus } from '../values.js';

/** The provider's own numeric ids; integers so they round-trip to the provider unchanged. */
const ProviderNumericId = z.int().positive();

export const Repository = z.object({
  repository_id: ProviderNumericId,
  installation_id: ProviderNumericId,
  owner: z.string(),
  name: z.string(),
  full_name: z.string(),
  url: z.url(),
  avatar_url: z.url(),
  private: z.boolean(),
  default_branch: z.string(),
});
export type Repository = z.infer<typeof Repository>;

/** GET /v1/repohost/repositories */
export const RepositoryList = z.object({
  repositories: z.array(Repository),
});
export type RepositoryList = z.infer<typeof RepositoryList>;

export const REPOSITORY_QUERY_MAX_LENGTH = 256;

export const RepositoriesQuery = z.object({
  q: z.string().max(REPOSITORY_QUERY_MAX_LENGTH).optional(),
});
export type RepositoriesQuery = z.infer<typeof RepositoriesQuery>;

/** The contract allows either form because providers differ; we pass the provider's value through. */
const ProviderId = z.union([z.number(), z.string()]);

export const ProviderUser = z.object({
  id: ProviderId,
  login: z.string(),
  avatar_url: z.string(),
});
export type ProviderUser = z.infer<typeof ProviderUser>;

export const Installation = z.object({
  id: ProviderId,
  account: z.string(),
  avatar_url: z.string(),
  target_type: z.string(),
  repository_selection: z.string(),
  suspended: z.boolean(),
  manage_url: z.string(),
});
export type Installation = z.infer<typeof Installation>;

/** An organisation member asked an owner to install the app; nothing is usable until the owner does. */
export const InstallationRequest = z.object({
  id: ProviderId,
  account: z.string(),
  avatar_url: z.string(),
  target_type: z.string(),
  requested_at: z.string(),
});
export type InstallationRequest = z.infer<typeof InstallationRequest>;

/** GET /v1/repohost/connection — optional fields follow the contract's "Required" column. */
export const ProviderConnection = z.object({
  status: ConnectionStatus.optional(),
  message: z.string().optional(),
  app_slug: z.string().optional(),
  install_url: z.url().optional(),
  user: ProviderUser.optional(),
  installations: z.array(Installation),
  installation_requests: z.array(InstallationRequest),
  installation_requests_status: z.string().optional(),
});
export type ProviderConnection = z.infer<typeof ProviderConnection>;

/** base64url(SHA-256(code_verifier)), unpadded: always 43 characters (RFC 7636, `S256`). */
export const CodeChallenge = z
  .string({ error: 'required: base64url(SHA-256(code_verifier)), 43 characters, as in PKCE (RFC 7636, S256)' })
  .regex(/^[A-Za-z0-9_-]{43}$/, 'must be base64url(SHA-256(code_verifier)) without padding: 43 characters');
export type CodeChallenge = z.infer<typeof CodeChallenge>;

/** The secret the client keeps while the browser installs: 43 to 128 unreserved characters (RFC 7636). */
export const CodeVerifier = z
  .string()
  .regex(/^[A-Za-z0-9._~-]{43,128}$/, 'must be 43 to 128 characters of A-Z, a-z, 0-9, "-", ".", "_", "~"');
export type CodeVerifier = z.infer<typeof CodeVerifier>;

/**
 * POST /v1/repohost/install-session. Only the native app's `<app_scheme>://repohost/setup` and the
 * web console's `<PUBLIC_BASE_URL>/settings/github` are allowed, but both are configuration, so
 * the exact-URI check belongs to the service.
 * `code_challenge` is required: the setup callback links nothing by itself, it hands a one-time
 * code back to `return_to`, and only this caller, presenting the verifier behind the challenge,
 * can redeem it (POST /v1/repohost/installations).
 */
export const InstallSessionRequest = z.object({
  return_to: z.string().min(1).max(2048),
  code_challenge: CodeChallenge,
  /** Only `S256` (the default): a plain challenge would be the verifier itself, sent in the clear. */
  code_challenge_method: z.literal('S256').optional(),
});
export type InstallSessionRequest = z.infer<typeof InstallSessionRequest>;

export const InstallSession = z.object({
  install_url: z.url(),
  expires_at: Timestamp,
});
export type InstallSession = z.infer<typeof InstallSession>;

/**
 * GET /v1/repohost/setup — the provider's redirect after installation; `state` is the proof.
 * `installation_id` is optional because the provider omits it when `setup_action` is `request`
 * (a member asked an owner to install, so no installation exists yet).
 */
export const SetupQuery = z.object({
  installation_id: optionalQueryParam(z.coerce.number().int().positive().optional()),
  setup_action: z.string().max(256).optional(),
  state: Id,
});
export type SetupQuery = z.infer<typeof SetupQuery>;

/**
 * POST /v1/repohost/installations: redeems the one-time `code` the setup callback handed to the
 * install session's `return_to`, with the verifier behind the session's `code_challenge`.
 */
export const LinkInstallationRequest = z.strictObject({
  code: z.string().min(1).max(256),
  code_verifier: CodeVerifier,
});
export type LinkInstallationRequest = z.infer<typeof LinkInstallationRequest>;

/** The installation now linked to the caller. */
export const LinkedInstallation = z.object({ installation: Installation });
export type LinkedInstallation = z.infer<typeof LinkedInstallation>;
