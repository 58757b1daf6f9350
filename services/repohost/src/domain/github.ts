import { createHash, timingSafeEqual } from 'node:crypto';
import type { HostedRepository, Installation } from '@threadwork/contracts';
import { invalidRequest } from '@threadwork/platform';
import type { GhRepository } from '../providers/github/shapes.js';

// The GitHub App's rules that need no I/O: where install sessions may return to, what a setup
// callback redirects to, who may redeem its code, how a webhook proves itself, and how GitHub's
// shapes become ours.

/** The native app's setup callback, an install session's `return_to`. */
export function setupReturnTo(appScheme: string): string {
  return `${appScheme}://repohost/setup`;
}

/** The web console's setup page, the other `return_to` an install session accepts (same origin as the gateway). */
export function consoleSetupUrl(publicBaseUrl: string): string {
  return `${publicBaseUrl}/settings/github`;
}

/**
 * An install session returns to exactly one of two URLs, compared as strings (no parsing, so no
 * look-alike passes): the native app's `<APP_SCHEME>://repohost/setup`, or the console's
 * `<PUBLIC_BASE_URL>/settings/github` when the public URL is configured. Nothing else: the
 * redirect carries a one-time code, so it must never lead off to anyone else's page.
 */
export function isAllowedReturnTo(returnTo: string, appScheme: string, publicBaseUrl: string | null = null): boolean {
  if (returnTo === setupReturnTo(appScheme)) return true;
  return publicBaseUrl !== null && returnTo === consoleSetupUrl(publicBaseUrl);
}

/** What `return_to` may be, for the refusal's message. */
export function allowedReturnTos(appScheme: string, publicBaseUrl: string | null): string {
  const app = setupReturnTo(appScheme);
  return publicBaseUrl === null ? app : `${app} or ${consoleSetupUrl(publicBaseUrl)}`;
}

/** Where GitHub sends a browser back after sign-in with GitHub: the gateway's callback. */
export function signInCallbackUrl(publicBaseUrl: string): string {
  return `${publicBaseUrl}/v1/auth/github/callback`;
}

/** GitHub's authorize page for the app's OAuth client, returning to `redirectUri`; the gateway adds `state`. */
export function authorizeUrl(webUrl: string, clientId: string, redirectUri: string): string {
  const url = new URL(`${webUrl.replace(/\/+$/, '')}/login/oauth/authorize`);
  url.searchParams.set('client_id', clientId);
  url.searchParams.set('redirect_uri', redirectUri);
  // No `scope`: a GitHub App's user token carries the app's permissions, not OAuth scopes.
  return url.href;
}

/** The app's install page; `state` comes back on the setup callback. */
export function installUrl(webUrl: string, slug: string, state?: string): string {
  const url = new URL(`${webUrl.replace(/\/+$/, '')}/apps/${encodeURIComponent(slug)}/installations/new`);
  if (state !== undefined) url.searchParams.set('state', state);
  return url.href;
}

/**
 * What the setup callback tells the native app: `installed` (installed on GitHub and verified;
 * `installation_id` names it and the one-time `code` links it, redeemed by the caller who created
 * the session with its verifier), `requested` (an organisation member asked an owner to install;
 * nothing to link yet), or `error` with a reason. No code is handed out on `error`.
 */
export type SetupOutcome =
  | { outcome: 'installed'; installationId: number; code: string }
  | { outcome: 'requested' }
  | {
      outcome: 'error';
      error:
        | 'invalid_state'
        | 'missing_installation'
        | 'installation_not_found'
        | 'unverified_installation'
        | 'not_installation_admin'
        | 'github_account_mismatch'
        | 'github_unavailable';
      installationId?: number;
    };

export function setupRedirect(returnTo: string, result: SetupOutcome): string {
  const url = new URL(returnTo);
  url.searchParams.set('outcome', result.outcome);
  if (result.outcome === 'error') url.searchParams.set('error', result.error);
  if ('installationId' in result && result.installationId !== undefined) {
    url.searchParams.set('installation_id', String(result.installationId));
  }
  if (result.outcome === 'installed') url.searchParams.set('code', result.code);
  return url.href;
}

/** PKCE's S256: base64url(SHA-256(verifier)), unpadded. */
export function codeChallengeOf(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/** Does `verifier` hash to `challenge`? Compared in constant time. */
export function verifierMatches(verifier: string, challenge: string): boolean {
  const given = Buffer.from(codeChallengeOf(verifier));
  const expected = Buffer.from(challenge);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** A one-time link code is stored by its hash, so a read of the database cannot redeem one. */
export function linkCodeHash(code: string): string {
  return createHash('sha256').update(code, 'utf8').digest('hex');
}

/**
 * May the owner of an install session link what this GitHub user installed? Each of our users is
 * verified as one GitHub user, and each GitHub user as one of ours, the first time a link of theirs
 * is redeemed: so an organisation admin lured into completing someone else's install session is
 * refused when either side is already known as someone else.
 */
export function identityConflict(input: {
  ownerId: string;
  githubUserId: number;
  /** The GitHub user id the owner is verified as, if any. */
  ownerGitHubId: number | null;
  /** The owner this GitHub user is verified as, if any. */
  githubUserOwner: string | null;
}): 'owner_is_another_github_user' | 'github_user_is_another_owner' | null {
  if (input.ownerGitHubId !== null && input.ownerGitHubId !== input.githubUserId) return 'owner_is_another_github_user';
  if (input.githubUserOwner !== null && input.githubUserOwner !== input.ownerId) return 'github_user_is_another_owner';
  return null;
}

/** The verified GitHub user's standing in an organisation (`GET /user/memberships/orgs/{org}`); null: none. */
export interface OrgMembership {
  state: string;
  role: string;
}

/**
 * Does this GitHub user administer the account an installation is on? Seeing an installation proves
 * little — `GET /user/installations` lists every installation in which the user can reach any
 * repository, so a member or an outside collaborator with read on one repository sees it — while a
 * link gives every repository of the installation. So: a user's own account is theirs alone
 * (`account.id` is the user's id); an organisation's needs an active `admin` membership (an owner,
 * who could install, uninstall or pick its repositories on GitHub anyway). Nothing else — an
 * enterprise, an installation without an account — is administered by a user we can check.
 */
export function administersAccount(input: {
  account: { id: number; type?: string | undefined } | null;
  githubUserId: number;
  /** The user's membership of the account, when it is an organisation. */
  membership: OrgMembership | null;
}): boolean {
  const { account, membership } = input;
  if (account === null) return false;
  if (account.type === 'User') return account.id === input.githubUserId;
  if (account.type === 'Organization') return membership?.state === 'active' && membership.role === 'admin';
  return false;
}

/**
 * Can this installation be linked to the session's owner? The setup URL's `installation_id` is
 * whatever the browser sends, so it proves nothing by itself. With the app's OAuth client, the
 * user who came back must administer the installation's account (`administersAccount`). Without
 * it, only an installation created after the session was (minus clock skew) is linked: the one
 * this session's user just made, not someone else's older one.
 */
export function mayLink(input: {
  installationCreatedAt: Date;
  sessionCreatedAt: Date;
  /** Whether the returning user administers the installation's account, when verified through OAuth. */
  userAdministers: boolean | null;
  clockSkewMs?: number;
}): boolean {
  if (input.userAdministers !== null) return input.userAdministers;
  const skew = input.clockSkewMs ?? 60_000;
  return input.installationCreatedAt.getTime() >= input.sessionCreatedAt.getTime() - skew;
}

/** What a delivery's body is remembered by, to know it again under another delivery id. */
export function webhookBodyHash(body: Buffer): string {
  return createHash('sha256').update(body).digest('hex');
}

/**
 * Top-level keys each event repohost processes always carries. `X-GitHub-Event` is not signed, so
 * a signed body could be sent again under another event's name; the payload says what it is.
 */
const EVENT_KEYS: Readonly<Record<string, readonly string[]>> = {
  installation: ['installation'],
  installation_repositories: ['installation', 'repositories_added', 'repositories_removed'],
  repository: ['repository'],
  pull_request: ['pull_request', 'number'],
  check_run: ['check_run'],
  check_suite: ['check_suite'],
  status: ['sha', 'context', 'state'],
};

/** Top-level keys an event's payload never carries (installations are not about one repository). */
const NEVER: Readonly<Record<string, readonly string[]>> = {
  installation: ['repository'],
  installation_repositories: ['repository'],
};

/** Top-level keys that, among the events repohost processes, only one event's payload carries. */
const ONLY_IN: Readonly<Record<string, string>> = {
  repositories_added: 'installation_repositories',
  pull_request: 'pull_request',
  check_run: 'check_run',
  check_suite: 'check_suite',
  context: 'status',
};

/**
 * Why a payload cannot be the event its header names, or null. Only where it is unambiguous: for
 * the events repohost acts on (an event it ignores cannot be mistaken for anything), a key the event
 * always carries is missing, or a key only another such event carries is there.
 */
export function eventMismatch(event: string, payload: Record<string, unknown>): string | null {
  const required = EVENT_KEYS[event];
  if (!required) return null;
  const missing = required.find((key) => !(key in payload));
  if (missing !== undefined) return `${event} payloads carry ${missing}`;
  const stray = (NEVER[event] ?? []).find((key) => key in payload);
  if (stray !== undefined) return `${event} payloads carry no ${stray}`;
  for (const [key, owner] of Object.entries(ONLY_IN)) {
    if (owner !== event && key in payload) return `a payload with ${key} is a ${owner} event, not ${event}`;
  }
  return null;
}

/**
 * The JSON payload of a delivery. GitHub sends `application/json`, or a form with the JSON in
 * `payload` when the app is set to `application/x-www-form-urlencoded`.
 */
export function parseWebhookPayload(contentType: string | undefined, body: Buffer): Record<string, unknown> {
  let text = body.toString('utf8');
  if ((contentType ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) {
    const payload = new URLSearchParams(text).get('payload');
    if (payload === null) throw invalidRequest('body: form without a payload field');
    text = payload;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw invalidRequest('body: not valid JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw invalidRequest('body: not a JSON object');
  }
  return parsed as Record<string, unknown>;
}

/** A GitHub repository: `url` (what clients see) and `clone_url` (what the runner clones) are both its https clone URL. */
export function githubRepository(repo: GhRepository, installationId: number): HostedRepository {
  return {
    repository_id: repo.id,
    installation_id: installationId,
    owner: repo.owner.login,
    name: repo.name,
    full_name: repo.full_name,
    url: repo.clone_url,
    avatar_url: repo.owner.avatar_url,
    private: repo.private,
    default_branch: repo.default_branch,
    clone_url: repo.clone_url,
  };
}

export interface InstallationFacts {
  id: number;
  account: string;
  avatarUrl: string;
  targetType: string;
  repositorySelection: string;
  suspended: boolean;
  manageUrl: string;
}

export function installationView(facts: InstallationFacts): Installation {
  return {
    id: facts.id,
    account: facts.account,
    avatar_url: facts.avatarUrl,
    target_type: facts.targetType,
    repository_selection: facts.repositorySelection,
    suspended: facts.suspended,
    manage_url: facts.manageUrl,
  };
}

/** Is a cached thing, read at `at` (null or absent: never), older than `ttlMs`? */
export function isStale(at: Date | null | undefined, now: Date, ttlMs: number): boolean {
  return !at || now.getTime() - at.getTime() >= ttlMs;
}
