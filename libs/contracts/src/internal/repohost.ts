import { z } from 'zod';
import { CodeChallenge, LinkInstallationRequest, Repository } from '../api/repohost.js';
import { Id, Timestamp } from '../common.js';
import { ClaimId } from './runs.js';

const OwnerId = Id;

// ---------------------------------------------------------------------------------------------
// repohost

export const RepositoriesRequest = z.object({ owner_id: OwnerId, q: z.string().max(256).optional() });
/** Resolves repositories the owner can see, in the order asked; any other is `not_found`. */
export const AccessRequest = z.object({
  owner_id: OwnerId,
  repository_ids: z.array(z.int().positive()).min(1).max(11),
});
/**
 * A repository as services see it: the public shape plus where the runner clones it from. The
 * clone URL may be a path on the server's disk (the `local` provider), so it never leaves the
 * deployment: clients see `url`, which names the repository without one.
 */
export const HostedRepository = Repository.extend({ clone_url: z.string().min(1) });
export type HostedRepository = z.infer<typeof HostedRepository>;
export const AccessResponse = z.object({ repositories: z.array(HostedRepository) });

/**
 * POST /v1/repohost/install-session: `return_to` is checked against the configured app scheme and
 * public URL by repohost; `code_challenge` binds the one-time code the setup callback mints to this caller's verifier.
 */
export const InstallSessionCreateRequest = z.object({
  owner_id: OwnerId,
  return_to: z.string().min(1).max(2048),
  code_challenge: CodeChallenge,
});
/**
 * GET /v1/repohost/setup, the provider's redirect after an installation (unauthenticated: `state`
 * is the proof). `code` is present when the app asks for user authorization during installation.
 */
export const SetupRequest = z.object({
  installation_id: z.int().positive().optional(),
  setup_action: z.string().max(256).optional(),
  state: Id,
  code: z.string().min(1).max(512).optional(),
});
/** Where the gateway redirects the browser (302): the session's `return_to` with the outcome. */
export const SetupResponse = z.object({ redirect_to: z.string().min(1) });
/**
 * POST /v1/repohost/installations: the caller redeems the setup callback's one-time code with the
 * verifier of the install session it created; only then is the installation linked to it.
 */
export const LinkRequest = LinkInstallationRequest.extend({ owner_id: OwnerId });
/**
 * POST /v1/repohost/webhooks, forwarded by the gateway untouched: the body travels base64-encoded
 * so the signature is checked over exactly the bytes the provider signed.
 */
export const WebhookRequest = z.object({
  event: z.string().min(1).max(256),
  delivery: Id,
  signature: z.string().max(512).optional(),
  content_type: z.string().max(256).optional(),
  body_base64: z.string(),
});
/** `duplicate`: this delivery id was received before and is not processed again. */
export const WebhookResponse = z.object({ status: z.enum(['accepted', 'duplicate']) });
/**
 * Internal only (never through the gateway): a short-lived credential for git over HTTPS to the
 * repositories asked for, all of one installation. Null for repositories that need none (local).
 * Only for the runner holding a live run (its claim id), and only for that run's repositories,
 * for the run's owner.
 */
export const TokenRequest = z.object({
  run_id: Id,
  claim_id: ClaimId,
  repository_ids: z.array(z.int().positive()).min(1).max(11),
});
export const TokenResponse = z.object({ token: z.string().min(1).nullable(), expires_at: Timestamp.nullable() });
/** The pull request of a thread's repository; null when none was opened (local repositories never get one). */
export const PublicationRequest = z.object({ owner_id: OwnerId, thread_id: Id, project_repository_id: Id });

/**
 * Sign in with GitHub, step 1 (GET /v1/auth/github): where a browser authorizes the GitHub App's
 * OAuth client — GitHub's `/login/oauth/authorize` with `client_id` and `redirect_uri` (the
 * gateway's `/v1/auth/github/callback` under PUBLIC_BASE_URL); the gateway adds its `state`. Null
 * when no OAuth client (or no PUBLIC_BASE_URL) is configured: sign-in with GitHub is off.
 */
export const OAuthClientRequest = z.object({});
export const OAuthClientResponse = z.object({ authorize_url: z.url() }).nullable();
export type OAuthClientResponse = z.infer<typeof OAuthClientResponse>;
/**
 * Sign in with GitHub, step 2 (GET /v1/auth/github/callback): the code GitHub handed the browser,
 * exchanged by repohost (the client secret never leaves it) for a user token, with which it reads
 * `GET /user`. The token is dropped; only who the user is comes back. A code GitHub refuses is
 * `invalid_request`; GitHub not answering is `unavailable`.
 */
export const OAuthUserRequest = z.object({ code: z.string().min(1).max(512) });
export const OAuthUserResponse = z.object({
  github_user: z.object({ id: z.int().positive(), login: z.string().min(1).max(256) }),
});
export type OAuthUserResponse = z.infer<typeof OAuthUserResponse>;
