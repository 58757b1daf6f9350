import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { App } from '@octokit/app';
import { Octokit as OctokitCore } from '@octokit/core';
import { z } from 'zod';
import {
  GhAccount,
  GhCheckRun,
  GhCommitStatus,
  GhInstallation,
  GhOrgMembership,
  GhPull,
  GhRepository,
  type GhAccount as GhAccountT,
} from './shapes.js';

// Every call repohost makes to GitHub, through @octokit/app: the app JWT for `/app/…`, installation
// tokens (minted and cached by @octokit/auth-app) for everything about repositories, and the
// user's OAuth token for the setup check. Tokens never leave this module except through
// `installationToken`, which serves `rpc.repohost.token`.

/** A GitHub answer other than success; `status` null when GitHub could not be reached at all. */
export class GitHubError extends Error {
  override name = 'GitHubError';
  constructor(
    message: string,
    readonly status: number | null,
    readonly errors: unknown = undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** Worth trying again later: GitHub down, rate limited, or unreachable. */
  get transient(): boolean {
    return this.status === null || this.status >= 500 || this.status === 429;
  }
}

function toGitHubError(err: unknown, what: string): GitHubError {
  if (err instanceof GitHubError) return err;
  const status =
    typeof err === 'object' && err !== null && 'status' in err && typeof err.status === 'number' ? err.status : null;
  const data =
    typeof err === 'object' && err !== null && 'response' in err && typeof err.response === 'object' && err.response
      ? (err.response as { data?: unknown }).data
      : undefined;
  const errors = typeof data === 'object' && data !== null && 'errors' in data ? data.errors : undefined;
  // Octokit reports a failed fetch as status 500 with the cause attached; either way: transient.
  return new GitHubError(`${what}: GitHub answered ${status ?? 'nothing'}`, status, errors, { cause: err });
}

async function github<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw toGitHubError(err, what);
  }
}

export type CreateJwt = (
  appId: string | number,
  timeDifference?: number,
) => Promise<{ jwt: string; expiresAt: string }>;

const base64url = (value: Buffer | string) => Buffer.from(value).toString('base64url');

/**
 * App JWTs (RS256, `iss` = app id), each reused until a minute before it expires. GitHub allows
 * at most ten minutes; `iat` is set a minute back for clocks that run ahead of GitHub's. A
 * `timeDifference` (Octokit measured GitHub's clock against ours after a rejected JWT) gets a
 * fresh one.
 */
export function createJwtFactory(appId: number, key: KeyObject, now: () => number = Date.now): CreateJwt {
  let cached: { jwt: string; expiresAtMs: number; timeDifference: number } | null = null;
  return async (_appId, timeDifference = 0) => {
    if (cached && cached.timeDifference === timeDifference && cached.expiresAtMs - now() > 60_000) {
      return { jwt: cached.jwt, expiresAt: new Date(cached.expiresAtMs).toISOString() };
    }
    const nowS = Math.floor(now() / 1000) + timeDifference;
    const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
    const payload = base64url(JSON.stringify({ iat: nowS - 60, exp: nowS + 9 * 60, iss: appId }));
    const signature = base64url(sign('RSA-SHA256', Buffer.from(`${header}.${payload}`), key));
    const jwt = `${header}.${payload}.${signature}`;
    // Our clock, so the reuse check above compares like with like.
    cached = { jwt, expiresAtMs: (nowS - timeDifference + 9 * 60) * 1000, timeDifference };
    return { jwt, expiresAt: new Date(cached.expiresAtMs).toISOString() };
  };
}

/** Requests give up after this: a hanging GitHub must not hold a request or a consumer forever. */
const REQUEST_TIMEOUT_MS = 10_000;

const timedFetch: typeof fetch = (input, init) =>
  fetch(input, { ...init, signal: init?.signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS) });

/**
 * The Octokit class @octokit/app builds its clients from: GitHub's (or Enterprise's) API root,
 * a timeout, and app authentication through `createJwt` instead of the key, so app JWTs are
 * cached (auth-app would sign a new one for every request).
 */
function octokitClass(apiUrl: string, createJwt: CreateJwt): typeof OctokitCore {
  const Base = OctokitCore.defaults({
    baseUrl: apiUrl,
    userAgent: 'threadwork-repohost',
    request: { fetch: timedFetch },
  });
  return class AppOctokit extends Base {
    constructor(options: ConstructorParameters<typeof OctokitCore>[0] = {}) {
      const auth: unknown = options.auth;
      let effective = options;
      if (typeof auth === 'object' && auth !== null && 'appId' in auth) {
        const rest: Record<string, unknown> = { ...(auth as Record<string, unknown>), createJwt };
        delete rest.privateKey;
        effective = { ...options, auth: rest };
      }
      super(effective);
    }
  };
}

export interface InstallationToken {
  token: string;
  expiresAt: string;
}

export interface PullRef {
  installationId: number;
  owner: string;
  repo: string;
}

export interface GitHubClient {
  /** Null when the installation does not exist (or no longer does). */
  installation(installationId: number): Promise<GhInstallation | null>;
  installationRepositories(installationId: number): Promise<GhRepository[]>;
  /** A token for git over HTTPS to these repositories, with at least `minLifetimeMs` left. */
  installationToken(installationId: number, repositoryIds: number[], minLifetimeMs: number): Promise<InstallationToken>;
  /**
   * An OAuth web-flow code → the user's token: the setup callback's, or sign-in's, which names the
   * `redirectUri` it was issued for (GitHub checks it against the authorization's).
   */
  exchangeCode(code: string, redirectUri?: string): Promise<string>;
  user(userToken: string): Promise<GhAccountT>;
  /** The user's membership of organisation `org` (`GET /user/memberships/orgs/{org}`); null when none. */
  orgMembership(userToken: string, org: string): Promise<GhOrgMembership | null>;
  findOpenPull(ref: PullRef, head: string, base: string): Promise<GhPull | null>;
  createPull(
    ref: PullRef,
    pull: { title: string; head: string; base: string; body: string; draft: boolean },
  ): Promise<GhPull>;
  getPull(ref: PullRef, number: number): Promise<GhPull>;
  updatePull(ref: PullRef, number: number, change: { body?: string; state?: 'open' | 'closed' }): Promise<GhPull>;
  checkRuns(ref: PullRef, sha: string): Promise<GhCheckRun[]>;
  commitStatuses(ref: PullRef, sha: string): Promise<GhCommitStatus[]>;
}

const PER_PAGE = 100;
/** Bounds a listing: 100 pages of 100 is far beyond any installation Threadwork is meant for. */
const MAX_PAGES = 100;

export function createGitHubClient(config: {
  appId: number;
  privateKey: string;
  apiUrl: string;
  webUrl: string;
  oauth: { clientId: string; clientSecret: string } | null;
}): GitHubClient {
  // Parsed once at start: a broken key stops the service with a clear error instead of failing later.
  const key = createPrivateKey(config.privateKey);
  const createJwt = createJwtFactory(config.appId, key);
  const Octokit = octokitClass(config.apiUrl, createJwt);
  const app = new App({ appId: config.appId, privateKey: config.privateKey, Octokit });
  const tokens = new Map<string, InstallationToken>();

  const installationOctokit = (installationId: number) => app.getInstallationOctokit(installationId);
  const userOctokit = (token: string) => new Octokit({ auth: token });

  return {
    async installation(installationId) {
      try {
        const { data } = await app.octokit.request('GET /app/installations/{installation_id}', {
          installation_id: installationId,
        });
        return GhInstallation.parse(data);
      } catch (err) {
        const error = toGitHubError(err, 'read installation');
        if (error.status === 404) return null;
        throw error;
      }
    },

    installationRepositories: (installationId) =>
      github('list installation repositories', async () => {
        const octokit = await installationOctokit(installationId);
        const all: GhRepository[] = [];
        for (let page = 1; page <= MAX_PAGES; page++) {
          const { data } = await octokit.request('GET /installation/repositories', { per_page: PER_PAGE, page });
          const repositories = z.array(GhRepository).parse(data.repositories);
          all.push(...repositories);
          if (repositories.length < PER_PAGE || all.length >= data.total_count) break;
        }
        return all;
      }),

    installationToken: (installationId, repositoryIds, minLifetimeMs) =>
      github('create installation token', async () => {
        const cacheKey = `${installationId}:${[...repositoryIds].sort((a, b) => a - b).join(',')}`;
        const cached = tokens.get(cacheKey);
        if (cached && Date.parse(cached.expiresAt) - Date.now() > minLifetimeMs) return cached;
        const auth = (await app.octokit.auth({
          type: 'installation',
          installationId,
          repositoryIds,
          // Enough to clone and push the thread branch; pull requests are repohost's own business.
          permissions: { contents: 'write' },
          // auth-app keeps tokens until a minute before expiry; a runner needs more than that.
          refresh: true,
        })) as { token: string; expiresAt: string };
        const token = { token: auth.token, expiresAt: new Date(auth.expiresAt).toISOString() };
        tokens.set(cacheKey, token);
        return token;
      }),

    async exchangeCode(code, redirectUri) {
      if (!config.oauth) throw new GitHubError('exchange code: no OAuth client configured', 400);
      const res = await github('exchange code', () =>
        timedFetch(`${config.webUrl}/login/oauth/access_token`, {
          method: 'POST',
          headers: { accept: 'application/json', 'content-type': 'application/json' },
          body: JSON.stringify({
            client_id: config.oauth!.clientId,
            client_secret: config.oauth!.clientSecret,
            code,
            ...(redirectUri === undefined ? {} : { redirect_uri: redirectUri }),
          }),
        }),
      );
      if (!res.ok) throw new GitHubError('exchange code: GitHub refused', res.status);
      const body = z
        .object({ access_token: z.string().optional(), error: z.string().optional() })
        .parse(await res.json());
      // GitHub's reason (`bad_verification_code`, …) is kept apart from the message, for the log.
      if (!body.access_token) throw new GitHubError('exchange code: GitHub gave no token', 400, body.error ?? null);
      return body.access_token;
    },

    user: (userToken) =>
      github('read user', async () => GhAccount.parse((await userOctokit(userToken).request('GET /user')).data)),

    async orgMembership(userToken, org) {
      try {
        const { data } = await userOctokit(userToken).request('GET /user/memberships/orgs/{org}', { org });
        return GhOrgMembership.parse(data);
      } catch (err) {
        const error = toGitHubError(err, 'read organisation membership');
        // GitHub's answer to a user who is no member (nor invited): not found.
        if (error.status === 404) return null;
        throw error;
      }
    },

    findOpenPull: (ref, head, base) =>
      github('find pull request', async () => {
        const octokit = await installationOctokit(ref.installationId);
        const { data } = await octokit.request('GET /repos/{owner}/{repo}/pulls', {
          owner: ref.owner,
          repo: ref.repo,
          head: `${ref.owner}:${head}`,
          base,
          state: 'open',
        });
        return z.array(GhPull).parse(data)[0] ?? null;
      }),

    createPull: (ref, pull) =>
      github('create pull request', async () => {
        const octokit = await installationOctokit(ref.installationId);
        const { data } = await octokit.request('POST /repos/{owner}/{repo}/pulls', {
          owner: ref.owner,
          repo: ref.repo,
          ...pull,
        });
        return GhPull.parse(data);
      }),

    getPull: (ref, number) =>
      github('read pull request', async () => {
        const octokit = await installationOctokit(ref.installationId);
        const { data } = await octokit.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', {
          owner: ref.owner,
          repo: ref.repo,
          pull_number: number,
        });
        return GhPull.parse(data);
      }),

    updatePull: (ref, number, change) =>
      github('update pull request', async () => {
        const octokit = await installationOctokit(ref.installationId);
        const { data } = await octokit.request('PATCH /repos/{owner}/{repo}/pulls/{pull_number}', {
          owner: ref.owner,
          repo: ref.repo,
          pull_number: number,
          ...change,
        });
        return GhPull.parse(data);
      }),

    checkRuns: (ref, sha) =>
      github('list check runs', async () => {
        const octokit = await installationOctokit(ref.installationId);
        const { data } = await octokit.request('GET /repos/{owner}/{repo}/commits/{ref}/check-runs', {
          owner: ref.owner,
          repo: ref.repo,
          ref: sha,
          per_page: PER_PAGE,
        });
        return z.array(GhCheckRun).parse(data.check_runs);
      }),

    commitStatuses: (ref, sha) =>
      github('read combined status', async () => {
        const octokit = await installationOctokit(ref.installationId);
        // The combined status keeps the latest status of each context, which is what review shows.
        const { data } = await octokit.request('GET /repos/{owner}/{repo}/commits/{ref}/status', {
          owner: ref.owner,
          repo: ref.repo,
          ref: sha,
          per_page: PER_PAGE,
        });
        return z.array(GhCommitStatus).parse(data.statuses);
      }),
  };
}
