import { execFile, execFileSync, spawn } from 'node:child_process';
import {
  createHash,
  createHmac,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  randomInt,
  verify,
  type KeyObject,
} from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { createBareRepo, type BareRepoOptions } from '../git.js';
import { githubSchemas } from '../github-schemas.js';

// A fake GitHub on 127.0.0.1 for tests of the GitHub App integration. It speaks the REST shapes
// of the endpoints Threadwork calls (under `/api/v3`, as GitHub Enterprise does, so the base URL
// with a path is exercised), checks the app JWT (RS256) against the app's public key and the
// installation and user tokens it issued, and serves real git smart HTTP over bare repositories
// through `git http-backend`, so `git clone` and `git push` work against it with an installation
// token as the password. Its web side has the app's install page (which installs the app for the
// login given in an `x-fake-login` header, or on an organisation it owns, and redirects to the
// setup URL) and the OAuth code exchange. Webhooks are sent signed to the configured URL by the helpers. Every success answer
// and every webhook is checked against GitHub's published OpenAPI descriptions as it goes out.

export interface FakeAccount {
  /** For an enterprise, its slug (GitHub gives an enterprise account no login). */
  login: string;
  id: number;
  type: 'User' | 'Organization' | 'Enterprise';
  avatar_url: string;
}

export interface FakeRepository {
  id: number;
  owner: FakeAccount;
  name: string;
  full_name: string;
  private: boolean;
  default_branch: string;
  /** Path of the bare repository behind it. */
  bare: string;
}

export interface FakeInstallation {
  id: number;
  account: FakeAccount;
  repository_selection: 'all' | 'selected';
  /** The repositories of a `selected` installation. */
  repository_ids: number[];
  suspended_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface FakePull {
  id: number;
  number: number;
  repository_id: number;
  title: string;
  body: string | null;
  head: string;
  base: string;
  state: 'open' | 'closed';
  draft: boolean;
  merged: boolean;
  created_at: string;
  updated_at: string;
}

export interface FakeCheckRun {
  id: number;
  repository_id: number;
  head_sha: string;
  name: string;
  status: 'queued' | 'in_progress' | 'completed';
  conclusion: string | null;
  details_url: string | null;
  started_at: string | null;
  completed_at: string | null;
}

export interface FakeCommitStatus {
  id: number;
  repository_id: number;
  sha: string;
  context: string;
  state: 'error' | 'failure' | 'pending' | 'success';
  target_url: string | null;
  created_at: string;
}

interface IssuedToken {
  kind: 'installation' | 'user';
  installation_id: number | null;
  login: string | null;
  /** Null: every repository of the installation. */
  repository_ids: number[] | null;
  permissions: Record<string, string>;
  expires_at: number;
}

export interface WebhookResult {
  status: number;
  body: string;
  delivery: string;
}

export interface WebhookOptions {
  delivery?: string;
  /** `missing` sends no signature header; `bad` a wrong one. */
  signature?: 'good' | 'bad' | 'missing';
  /** A payload GitHub would not send, on purpose (left out of the schema check). */
  offSpec?: boolean;
}

export interface FakeGitHubOptions {
  appId: number;
  slug: string;
  /** The app's public key (the service signs its JWTs with the private half). */
  publicKey: KeyObject | string;
  webhookSecret: string;
  /** OAuth client of the app; when set, the install page adds a `code` to the setup redirect. */
  oauth?: { clientId: string; clientSecret: string };
  /** Lifetime of issued installation tokens (GitHub: one hour). */
  tokenTtlMs?: number;
}

export interface FakeGitHub {
  /** `http://127.0.0.1:PORT` — GITHUB_WEB_URL. */
  webUrl: string;
  /** `http://127.0.0.1:PORT/api/v3` — GITHUB_API_URL. */
  apiUrl: string;
  /** Where the install page sends the browser back to (the app's Setup URL). */
  setupUrl: string;
  /** Where webhooks go (the app's Webhook URL). */
  webhookUrl: string;
  readonly accounts: Map<string, FakeAccount>;
  /** Organisation login → member login → role. */
  readonly memberships: Map<string, Map<string, 'admin' | 'member'>>;
  readonly repositories: Map<number, FakeRepository>;
  readonly installations: Map<number, FakeInstallation>;
  readonly pulls: FakePull[];
  readonly checkRuns: FakeCheckRun[];
  readonly statuses: FakeCommitStatus[];
  /** Every distinct app JWT that authenticated a request. */
  readonly jwtsSeen: Set<string>;
  /** Count of installation tokens issued, per installation id. */
  readonly tokensIssued: Map<number, number>;
  /** `METHOD path` of every API request, oldest first. */
  readonly requests: string[];
  /**
   * Every way an answer or webhook of the fake differed from GitHub's published descriptions
   * (`@octokit/openapi`, `@octokit/openapi-webhooks`). `close()` fails when there is any.
   */
  readonly schemaProblems: string[];
  account(login: string, type?: FakeAccount['type']): FakeAccount;
  /**
   * Makes `login` a member of organisation `org`: an `admin` (owner) installs the app on it, a
   * `member` can only ask an owner to (GitHub's `setup_action=request`); both see its installation
   * in `GET /user/installations`, and `GET /user/memberships/orgs/{org}` answers their role.
   */
  addMember(org: string, login: string, role?: 'admin' | 'member'): void;
  addRepository(owner: string, name: string, opts?: BareRepoOptions & { private?: boolean }): FakeRepository;
  repository(fullName: string): FakeRepository;
  install(
    login: string,
    opts?: { selection?: 'all' | 'selected'; repositoryIds?: number[]; createdAt?: Date },
  ): FakeInstallation;
  /** The https URL git clones from (credentials not included). */
  cloneUrl(fullName: string): string;
  /** The commit a branch of a repository points at, or null. */
  branchSha(fullName: string, branch: string): string | null;
  /** A user token as the OAuth exchange would issue it, for tests that skip the web page. */
  oauthCode(login: string): string;
  addCheckRun(fullName: string, sha: string, run: Partial<Omit<FakeCheckRun, 'id' | 'repository_id'>>): FakeCheckRun;
  updateCheckRun(id: number, change: Partial<Omit<FakeCheckRun, 'id' | 'repository_id'>>): FakeCheckRun;
  setStatus(fullName: string, sha: string, status: Pick<FakeCommitStatus, 'context' | 'state'>): FakeCommitStatus;
  /**
   * Makes the next `times` API requests matching `method` and `path` (a pattern over the path
   * after `/api/v3`) fail with `status` and GitHub's error shape: `{message, documentation_url}`
   * plus any `extra` fields (e.g. `errors`). GitHub's messages can echo what the request carried.
   */
  failNext(
    method: string,
    path: RegExp,
    failure: { status: number; message: string; extra?: Record<string, unknown>; times?: number },
  ): void;
  /** Signs and posts a webhook to `webhookUrl`. */
  sendWebhook(event: string, payload: Record<string, unknown>, opts?: WebhookOptions): Promise<WebhookResult>;
  /** Webhook payloads in GitHub's shapes, built from the fake's state, checked as they are sent. */
  payloads: {
    checkRun(action: string, id: number): Record<string, unknown>;
    status(id: number): Record<string, unknown>;
    pullRequest(action: string, fullName: string, number: number): Record<string, unknown>;
    installation(action: string, id: number): Record<string, unknown>;
    installationRepositories(action: 'added' | 'removed', id: number, repositoryIds: number[]): Record<string, unknown>;
    repository(action: string, id: number, extra?: Record<string, unknown>): Record<string, unknown>;
  };
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const SHA = /^[0-9a-f]{40}$/;
const execFileAsync = promisify(execFile);

function base64url(input: string): Buffer {
  return Buffer.from(input.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
  res.end(JSON.stringify(body));
}

/** The webhook signature GitHub sends in `X-Hub-Signature-256`. */
export function signWebhook(secret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export async function startFakeGitHub(options: FakeGitHubOptions): Promise<FakeGitHub> {
  const publicKey = typeof options.publicKey === 'string' ? createPublicKey(options.publicKey) : options.publicKey;
  const tokenTtlMs = options.tokenTtlMs ?? 60 * 60 * 1000;
  const root = mkdtempSync(join(tmpdir(), 'threadwork-fake-github-'));
  const accounts = new Map<string, FakeAccount>();
  const memberships = new Map<string, Map<string, 'admin' | 'member'>>();
  const repositories = new Map<number, FakeRepository>();
  const installations = new Map<number, FakeInstallation>();
  const pulls: FakePull[] = [];
  const checkRuns: FakeCheckRun[] = [];
  const statuses: FakeCommitStatus[] = [];
  const tokens = new Map<string, IssuedToken>();
  const codes = new Map<string, string>();
  const jwtsSeen = new Set<string>();
  const tokensIssued = new Map<number, number>();
  const requests: string[] = [];
  const schemaProblems: string[] = [];
  const schemas = githubSchemas();
  const check = (what: string, problems: string[]) => {
    for (const problem of problems) schemaProblems.push(`${what}: ${problem}`);
  };
  let nextId = randomInt(100_000, 900_000);
  const id = () => ++nextId;

  const server: Server = createServer((req, res) => {
    void route(req, res).catch((err: unknown) => {
      if (err instanceof HttpError) {
        if (!res.headersSent) sendJson(res, err.status, { message: err.message, ...err.extra });
        else res.end();
        return;
      }
      if (!res.headersSent) sendJson(res, 500, { message: err instanceof Error ? err.message : String(err) });
      else res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const webUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const apiUrl = `${webUrl}/api/v3`;

  // --- shapes ----------------------------------------------------------------------------------
  // GitHub's objects differ between the REST answers and the webhook payloads: each builder takes
  // the description it answers for, lays the fields the fake models over the schema's own
  // placeholders, and the result is checked as it goes out.

  type Flavour = 'rest' | 'webhook';
  const shaped = (flavour: Flavour, component: string, ours: Record<string, unknown>) =>
    flavour === 'rest' ? schemas.restShape(component, ours) : schemas.webhookShape(component, ours);

  const accountJson = (a: FakeAccount, flavour: Flavour = 'rest') =>
    shaped(flavour, 'simple-user', {
      login: a.login,
      id: a.id,
      node_id: `A_${a.id}`,
      avatar_url: a.avatar_url,
      type: a.type,
      url: `${apiUrl}/users/${a.login}`,
      html_url: `${webUrl}/${a.login}`,
    });

  const repositoryFields = (r: FakeRepository, flavour: Flavour) => ({
    id: r.id,
    node_id: `R_${r.id}`,
    name: r.name,
    full_name: r.full_name,
    owner: accountJson(r.owner, flavour),
    private: r.private,
    html_url: `${webUrl}/${r.full_name}`,
    url: `${apiUrl}/repos/${r.full_name}`,
    clone_url: `${webUrl}/${r.full_name}.git`,
    default_branch: r.default_branch,
    archived: false,
    disabled: false,
    visibility: r.private ? 'private' : 'public',
  });

  const repositoryJson = (r: FakeRepository) => shaped('rest', 'repository', repositoryFields(r, 'rest'));
  const minimalRepositoryJson = (r: FakeRepository) => {
    const { clone_url, default_branch, archived, disabled, visibility, ...minimal } = repositoryFields(r, 'rest');
    return shaped('rest', 'minimal-repository', {
      ...minimal,
      clone_url,
      default_branch,
      archived,
      disabled,
      visibility,
    });
  };
  const webhookRepositoryJson = (r: FakeRepository) =>
    shaped('webhook', 'repository-webhooks', repositoryFields(r, 'webhook'));

  const installationJson = (i: FakeInstallation, flavour: Flavour = 'rest') =>
    shaped(flavour, 'installation', {
      id: i.id,
      account: i.account.type === 'Enterprise' ? enterpriseJson(i.account, flavour) : accountJson(i.account, flavour),
      repository_selection: i.repository_selection,
      html_url:
        i.account.type === 'Organization'
          ? `${webUrl}/organizations/${i.account.login}/settings/installations/${i.id}`
          : `${webUrl}/settings/installations/${i.id}`,
      access_tokens_url: `${apiUrl}/app/installations/${i.id}/access_tokens`,
      repositories_url: `${apiUrl}/installation/repositories`,
      app_id: options.appId,
      app_slug: options.slug,
      target_id: i.account.id,
      target_type: i.account.type,
      permissions: { contents: 'write', pull_requests: 'write', checks: 'read', statuses: 'read', metadata: 'read' },
      events: ['check_run', 'check_suite', 'pull_request', 'repository', 'status'],
      created_at: i.created_at,
      updated_at: i.updated_at,
      suspended_at: i.suspended_at,
      suspended_by: null,
    });

  /** An enterprise account, as GitHub describes one: a slug and a name, no login. */
  const enterpriseJson = (a: FakeAccount, flavour: Flavour) =>
    shaped(flavour, 'enterprise', {
      id: a.id,
      node_id: `E_${a.id}`,
      slug: a.login,
      name: a.login,
      html_url: `${webUrl}/enterprises/${a.login}`,
      avatar_url: a.avatar_url,
      created_at: '2020-01-01T00:00:00Z',
      updated_at: '2020-01-01T00:00:00Z',
    });

  function branchSha(repo: FakeRepository, branch: string): string | null {
    try {
      return execFileSync(
        'git',
        ['--git-dir', repo.bare, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`],
        {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
        },
      ).trim();
    } catch {
      return null;
    }
  }

  /** The fields every pull-request shape has; `merged` and mergeability only on a single pull. */
  const pullFields = (p: FakePull, flavour: Flavour) => {
    const repo = repositories.get(p.repository_id)!;
    const headSha = branchSha(repo, p.head) ?? '0'.repeat(40);
    const repoJson = flavour === 'rest' ? repositoryJson(repo) : webhookRepositoryJson(repo);
    const ref = (name: string, sha: string) => ({
      label: `${repo.owner.login}:${name}`,
      ref: name,
      sha,
      repo: repoJson,
      user: accountJson(repo.owner, flavour),
    });
    return {
      id: p.id,
      node_id: `PR_${p.id}`,
      number: p.number,
      html_url: `${webUrl}/${repo.full_name}/pull/${p.number}`,
      url: `${apiUrl}/repos/${repo.full_name}/pulls/${p.number}`,
      state: p.state,
      draft: p.draft,
      merged_at: p.merged ? p.updated_at : null,
      closed_at: p.state === 'closed' ? p.updated_at : null,
      title: p.title,
      body: p.body,
      head: ref(p.head, headSha),
      base: ref(p.base, branchSha(repo, p.base) ?? '0'.repeat(40)),
      user: shaped(flavour, 'simple-user', { login: `${options.slug}[bot]`, id: 1, type: 'Bot' }),
      created_at: p.created_at,
      updated_at: p.updated_at,
    };
  };
  const mergeability = (p: FakePull) => ({
    merged: p.merged,
    mergeable: p.state === 'open' ? true : null,
    mergeable_state: p.state !== 'open' ? 'unknown' : p.draft ? 'draft' : 'clean',
  });
  const pullJson = (p: FakePull) => shaped('rest', 'pull-request', { ...pullFields(p, 'rest'), ...mergeability(p) });
  // The list answers the simple shape: no `merged`, no mergeability (GitHub computes those per pull).
  const pullSimpleJson = (p: FakePull) => shaped('rest', 'pull-request-simple', pullFields(p, 'rest'));
  const webhookPullJson = (p: FakePull) =>
    shaped('webhook', 'pull-request-webhook', { ...pullFields(p, 'webhook'), ...mergeability(p) });

  const checkRunFields = (c: FakeCheckRun) => {
    const repo = repositories.get(c.repository_id)!;
    return {
      id: c.id,
      node_id: `CR_${c.id}`,
      head_sha: c.head_sha,
      name: c.name,
      status: c.status,
      conclusion: c.conclusion,
      details_url: c.details_url,
      html_url: `${webUrl}/${repo.full_name}/runs/${c.id}`,
      url: `${apiUrl}/repos/${repo.full_name}/check-runs/${c.id}`,
      started_at: c.started_at,
      completed_at: c.completed_at,
      pull_requests: pulls
        .filter((p) => p.repository_id === repo.id && p.state === 'open' && branchSha(repo, p.head) === c.head_sha)
        .map((p) =>
          shaped('rest', 'pull-request-minimal', {
            number: p.number,
            id: p.id,
            url: `${apiUrl}/repos/${repo.full_name}/pulls/${p.number}`,
            head: {
              ref: p.head,
              sha: c.head_sha,
              repo: { id: repo.id, url: `${apiUrl}/repos/${repo.full_name}`, name: repo.name },
            },
            base: {
              ref: p.base,
              sha: branchSha(repo, p.base) ?? '0'.repeat(40),
              repo: { id: repo.id, url: `${apiUrl}/repos/${repo.full_name}`, name: repo.name },
            },
          }),
        ),
    };
  };
  const checkRunJson = (c: FakeCheckRun) => shaped('rest', 'check-run', checkRunFields(c));
  const webhookCheckRunJson = (c: FakeCheckRun) =>
    shaped('webhook', 'check-run-with-simple-check-suite', {
      ...checkRunFields(c),
      check_suite: { head_sha: c.head_sha, status: c.status, conclusion: c.conclusion },
    });

  const statusJson = (s: FakeCommitStatus) =>
    shaped('rest', 'simple-commit-status', {
      id: s.id,
      node_id: `SC_${s.id}`,
      context: s.context,
      state: s.state,
      target_url: s.target_url,
      description: null,
      created_at: s.created_at,
      updated_at: s.created_at,
    });

  // --- authentication --------------------------------------------------------------------------

  function credential(req: IncomingMessage): { scheme: string; value: string } | null {
    const header = req.headers.authorization;
    if (!header) return null;
    const match = /^(bearer|token)\s+(\S+)$/i.exec(header);
    return match ? { scheme: match[1]!.toLowerCase(), value: match[2]! } : null;
  }

  /** The app JWT: RS256 by the app's key, issued by the app, alive, and at most ten minutes long. */
  function requireJwt(req: IncomingMessage): void {
    const cred = credential(req);
    if (!cred) throw new HttpError(401, 'Requires authentication');
    const parts = cred.value.split('.');
    if (parts.length !== 3) throw new HttpError(401, 'A JSON web token could not be decoded');
    const [h, p, s] = parts as [string, string, string];
    let header: { alg?: string };
    let payload: { iss?: unknown; iat?: number; exp?: number };
    try {
      header = JSON.parse(base64url(h).toString('utf8')) as typeof header;
      payload = JSON.parse(base64url(p).toString('utf8')) as typeof payload;
    } catch {
      throw new HttpError(401, 'A JSON web token could not be decoded');
    }
    if (header.alg !== 'RS256') throw new HttpError(401, 'JWT algorithm must be RS256');
    if (!verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, base64url(s))) {
      throw new HttpError(401, 'A JSON web token could not be decoded');
    }
    const now = Math.floor(Date.now() / 1000);
    if (String(payload.iss) !== String(options.appId)) throw new HttpError(401, "'Issuer' claim ('iss') must match");
    if (typeof payload.iat !== 'number' || payload.iat > now + 60) {
      throw new HttpError(401, "'Issued at' claim ('iat') must be an Integer representing a time in the past");
    }
    if (typeof payload.exp !== 'number' || payload.exp <= now) {
      throw new HttpError(401, "'Expiration time' claim ('exp') is too far in the future or has passed");
    }
    if (payload.exp - payload.iat > 660)
      throw new HttpError(401, "'Expiration time' claim ('exp') is too far in the future");
    jwtsSeen.add(cred.value);
  }

  function requireToken(req: IncomingMessage, kind: IssuedToken['kind']): IssuedToken {
    const cred = credential(req);
    const token = cred ? tokens.get(cred.value) : undefined;
    if (!token || token.kind !== kind || token.expires_at <= Date.now()) throw new HttpError(401, 'Bad credentials');
    return token;
  }

  function installationRepositoryIds(installation: FakeInstallation): number[] {
    if (installation.repository_selection === 'selected') return [...installation.repository_ids];
    return [...repositories.values()].filter((r) => r.owner.id === installation.account.id).map((r) => r.id);
  }

  function tokenRepositoryIds(token: IssuedToken): number[] {
    const installation = token.installation_id === null ? undefined : installations.get(token.installation_id);
    if (!installation || installation.suspended_at) return [];
    const all = installationRepositoryIds(installation);
    return token.repository_ids === null ? all : all.filter((id) => token.repository_ids!.includes(id));
  }

  /** The repository, if the installation token may see it (else 404, as GitHub answers). */
  function repoFor(req: IncomingMessage, owner: string, name: string): FakeRepository {
    const token = requireToken(req, 'installation');
    const repo = [...repositories.values()].find((r) => r.full_name.toLowerCase() === `${owner}/${name}`.toLowerCase());
    if (!repo || !tokenRepositoryIds(token).includes(repo.id)) throw new HttpError(404, 'Not Found');
    return repo;
  }

  function issueToken(installation: FakeInstallation, body: Record<string, unknown>) {
    if (installation.suspended_at) throw new HttpError(403, 'This installation has been suspended');
    const available = installationRepositoryIds(installation);
    let repositoryIds: number[] | null = null;
    if (Array.isArray(body.repository_ids)) {
      repositoryIds = body.repository_ids.map(Number);
      if (repositoryIds.some((rid) => !available.includes(rid))) {
        throw new HttpError(
          422,
          'There is at least one repository that does not exist or is not accessible to the parent installation.',
        );
      }
    }
    const token = `ghs_${randomBytes(18).toString('hex')}`;
    const permissions = (body.permissions as Record<string, string> | undefined) ?? {
      contents: 'write',
      pull_requests: 'write',
    };
    const issued: IssuedToken = {
      kind: 'installation',
      installation_id: installation.id,
      login: null,
      repository_ids: repositoryIds,
      permissions,
      expires_at: Date.now() + tokenTtlMs,
    };
    tokens.set(token, issued);
    tokensIssued.set(installation.id, (tokensIssued.get(installation.id) ?? 0) + 1);
    return {
      token,
      expires_at: new Date(issued.expires_at).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      permissions,
      repository_selection: repositoryIds === null ? installation.repository_selection : 'selected',
      ...(repositoryIds === null
        ? {}
        : { repositories: repositoryIds.map((rid) => repositoryJson(repositories.get(rid)!)) }),
    };
  }

  // --- routing ---------------------------------------------------------------------------------

  const failures: {
    method: string;
    path: RegExp;
    status: number;
    message: string;
    extra: Record<string, unknown>;
    left: number;
  }[] = [];

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', webUrl);
    const path = url.pathname;
    if (path.startsWith('/api/v3/')) {
      requests.push(`${req.method} ${path.slice('/api/v3'.length)}`);
      const failure = failures.find(
        (f) => f.left > 0 && f.method === req.method && f.path.test(path.slice('/api/v3'.length)),
      );
      if (failure) {
        failure.left--;
        throw new HttpError(failure.status, failure.message, {
          documentation_url: 'https://docs.github.com/rest',
          ...failure.extra,
        });
      }
      const body = req.method === 'GET' ? {} : parseJsonBody(await readBody(req));
      return api(req, res, path.slice('/api/v3'.length), url.searchParams, body);
    }
    if (/^\/[^/]+\/[^/]+\.git(\/|$)/.test(path)) return gitHttp(req, res, url);
    if (req.method === 'GET' && path === `/apps/${options.slug}/installations/new`) return installPage(req, res, url);
    if (req.method === 'POST' && path === '/login/oauth/access_token') return oauthExchange(req, res);
    throw new HttpError(404, 'Not Found');
  }

  function parseJsonBody(raw: Buffer): Record<string, unknown> {
    if (raw.length === 0) return {};
    try {
      return JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
    } catch {
      throw new HttpError(400, 'Problems parsing JSON');
    }
  }

  function api(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    query: URLSearchParams,
    body: Record<string, unknown>,
  ): void {
    const method = req.method ?? 'GET';
    let m: RegExpExecArray | null;
    // A success answer, checked against GitHub's description of the operation (`template`).
    const reply = (template: string, status: number, answer: unknown) => {
      check(`${method} ${template} ${status}`, schemas.response(method, template, status, answer));
      sendJson(res, status, answer);
    };

    if (method === 'GET' && (m = /^\/app\/installations\/(\d+)$/.exec(path))) {
      requireJwt(req);
      const installation = installations.get(Number(m[1]));
      if (!installation) throw new HttpError(404, 'Not Found');
      return reply('/app/installations/{installation_id}', 200, installationJson(installation));
    }
    if (method === 'POST' && (m = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path))) {
      requireJwt(req);
      const installation = installations.get(Number(m[1]));
      if (!installation) throw new HttpError(404, 'Not Found');
      return reply('/app/installations/{installation_id}/access_tokens', 201, issueToken(installation, body));
    }
    if (method === 'GET' && path === '/installation/repositories') {
      const token = requireToken(req, 'installation');
      const installation = installations.get(token.installation_id!)!;
      const all = tokenRepositoryIds(token).map((rid) => repositories.get(rid)!);
      const perPage = Math.min(100, Number(query.get('per_page') ?? 30));
      const page = Math.max(1, Number(query.get('page') ?? 1));
      return reply('/installation/repositories', 200, {
        total_count: all.length,
        repository_selection: installation.repository_selection,
        repositories: all.slice((page - 1) * perPage, page * perPage).map(repositoryJson),
      });
    }
    if (method === 'GET' && path === '/user') {
      const token = requireToken(req, 'user');
      const user = accounts.get(token.login!)!;
      return reply(
        '/user',
        200,
        shaped('rest', 'public-user', {
          ...accountJson(user),
          name: null,
          created_at: '2020-01-01T00:00:00Z',
          updated_at: '2020-01-01T00:00:00Z',
        }),
      );
    }
    if (method === 'GET' && path === '/user/installations') {
      const token = requireToken(req, 'user');
      const user = accounts.get(token.login!)!;
      // Installations the user can reach: on their own account, and on organisations they belong to.
      const visible = [...installations.values()].filter(
        (i) => i.account.id === user.id || memberships.get(i.account.login)?.has(user.login) === true,
      );
      const perPage = Math.min(100, Number(query.get('per_page') ?? 30));
      const page = Math.max(1, Number(query.get('page') ?? 1));
      return reply('/user/installations', 200, {
        total_count: visible.length,
        installations: visible.slice((page - 1) * perPage, page * perPage).map((i) => installationJson(i)),
      });
    }
    if (method === 'GET' && (m = /^\/user\/memberships\/orgs\/([^/]+)$/.exec(path))) {
      const token = requireToken(req, 'user');
      const user = accounts.get(token.login!)!;
      const org = accounts.get(m[1]!);
      const role = org?.type === 'Organization' ? memberships.get(org.login)?.get(user.login) : undefined;
      // GitHub answers a user who is no member of the organisation (or of no organisation) 404.
      if (!org || !role) throw new HttpError(404, 'Not Found');
      return reply(
        '/user/memberships/orgs/{org}',
        200,
        shaped('rest', 'org-membership', {
          url: `${apiUrl}/orgs/${org.login}/memberships/${user.login}`,
          state: 'active',
          role,
          organization_url: `${apiUrl}/orgs/${org.login}`,
          organization: shaped('rest', 'organization-simple', {
            login: org.login,
            id: org.id,
            node_id: `O_${org.id}`,
            url: `${apiUrl}/orgs/${org.login}`,
            avatar_url: org.avatar_url,
            description: null,
          }),
          user: accountJson(user),
        }),
      );
    }
    if ((m = /^\/repos\/([^/]+)\/([^/]+)\/pulls$/.exec(path))) {
      const repo = repoFor(req, m[1]!, m[2]!);
      if (method === 'GET') {
        const state = query.get('state') ?? 'open';
        const head = query.get('head');
        const base = query.get('base');
        const found = pulls.filter(
          (p) =>
            p.repository_id === repo.id &&
            (state === 'all' || p.state === state) &&
            (head === null || `${repo.owner.login}:${p.head}` === head) &&
            (base === null || p.base === base),
        );
        return reply('/repos/{owner}/{repo}/pulls', 200, found.map(pullSimpleJson));
      }
      if (method === 'POST') return reply('/repos/{owner}/{repo}/pulls', 201, pullJson(createPull(repo, body)));
    }
    if ((m = /^\/repos\/([^/]+)\/([^/]+)\/pulls\/(\d+)$/.exec(path))) {
      const repo = repoFor(req, m[1]!, m[2]!);
      const pull = pulls.find((p) => p.repository_id === repo.id && p.number === Number(m![3]));
      if (!pull) throw new HttpError(404, 'Not Found');
      if (method === 'GET') return reply('/repos/{owner}/{repo}/pulls/{pull_number}', 200, pullJson(pull));
      if (method === 'PATCH') {
        if (typeof body.title === 'string') pull.title = body.title;
        if (typeof body.body === 'string') pull.body = body.body;
        if (body.state === 'open' || body.state === 'closed') {
          if (pull.merged) throw new HttpError(422, 'Validation Failed');
          pull.state = body.state;
        }
        pull.updated_at = new Date().toISOString();
        return reply('/repos/{owner}/{repo}/pulls/{pull_number}', 200, pullJson(pull));
      }
    }
    if (method === 'GET' && (m = /^\/repos\/([^/]+)\/([^/]+)\/commits\/([^/]+)\/check-runs$/.exec(path))) {
      const repo = repoFor(req, m[1]!, m[2]!);
      const sha = resolveRef(repo, decodeURIComponent(m[3]!));
      const runs = checkRuns.filter((c) => c.repository_id === repo.id && c.head_sha === sha);
      return reply('/repos/{owner}/{repo}/commits/{ref}/check-runs', 200, {
        total_count: runs.length,
        check_runs: runs.map(checkRunJson),
      });
    }
    if (method === 'GET' && (m = /^\/repos\/([^/]+)\/([^/]+)\/commits\/([^/]+)\/status$/.exec(path))) {
      const repo = repoFor(req, m[1]!, m[2]!);
      const sha = resolveRef(repo, decodeURIComponent(m[3]!));
      // Latest per context, newest first, like GitHub's combined status.
      const latest = new Map<string, FakeCommitStatus>();
      for (const s of statuses.filter((x) => x.repository_id === repo.id && x.sha === sha)) latest.set(s.context, s);
      const list = [...latest.values()].reverse();
      const state = list.some((s) => s.state === 'error' || s.state === 'failure')
        ? 'failure'
        : list.length === 0 || list.some((s) => s.state === 'pending')
          ? 'pending'
          : 'success';
      return reply(
        '/repos/{owner}/{repo}/commits/{ref}/status',
        200,
        shaped('rest', 'combined-commit-status', {
          state,
          sha,
          total_count: list.length,
          statuses: list.map(statusJson),
          repository: minimalRepositoryJson(repo),
          url: `${apiUrl}/repos/${repo.full_name}/commits/${sha}/status`,
          commit_url: `${apiUrl}/repos/${repo.full_name}/commits/${sha}`,
        }),
      );
    }
    throw new HttpError(404, 'Not Found');
  }

  function resolveRef(repo: FakeRepository, ref: string): string {
    if (SHA.test(ref)) return ref;
    const sha = branchSha(repo, ref.replace(/^refs\/heads\//, '').replace(/^heads\//, ''));
    if (!sha) throw new HttpError(422, `No commit found for SHA: ${ref}`);
    return sha;
  }

  function createPull(repo: FakeRepository, body: Record<string, unknown>): FakePull {
    const rawHead = typeof body.head === 'string' ? body.head : '';
    const head = rawHead.includes(':') ? rawHead.slice(rawHead.indexOf(':') + 1) : rawHead;
    const base = typeof body.base === 'string' ? body.base : '';
    const title = typeof body.title === 'string' ? body.title : '';
    const invalid = (field: string) =>
      new HttpError(422, 'Validation Failed', { errors: [{ resource: 'PullRequest', field, code: 'invalid' }] });
    if (!title)
      throw new HttpError(422, 'Validation Failed', {
        errors: [{ resource: 'PullRequest', field: 'title', code: 'missing_field' }],
      });
    if (!head || branchSha(repo, head) === null) throw invalid('head');
    if (!base || branchSha(repo, base) === null) throw invalid('base');
    if (pulls.some((p) => p.repository_id === repo.id && p.state === 'open' && p.head === head && p.base === base)) {
      throw new HttpError(422, 'Validation Failed', {
        errors: [
          {
            resource: 'PullRequest',
            code: 'custom',
            message: `A pull request already exists for ${repo.owner.login}:${head}.`,
          },
        ],
      });
    }
    const now = new Date().toISOString();
    const pull: FakePull = {
      id: id(),
      number: pulls.filter((p) => p.repository_id === repo.id).length + 1,
      repository_id: repo.id,
      title,
      body: typeof body.body === 'string' ? body.body : null,
      head,
      base,
      state: 'open',
      draft: body.draft === true,
      merged: false,
      created_at: now,
      updated_at: now,
    };
    pulls.push(pull);
    return pull;
  }

  // --- web: install page and OAuth --------------------------------------------------------------

  /**
   * The signed-in user (`x-fake-login`) installs the app (all repositories) on their own account,
   * or on the organisation named by `x-fake-target` if they own it, and is sent to the setup URL.
   * A member who does not own the organisation can only ask its owners: `setup_action=request`,
   * no installation. With the app's OAuth client, the redirect carries the user's `code`.
   */
  function installPage(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const login = req.headers['x-fake-login'];
    if (typeof login !== 'string' || !accounts.has(login)) throw new HttpError(401, 'sign in first (x-fake-login)');
    const targetHeader = req.headers['x-fake-target'];
    const targetLogin = typeof targetHeader === 'string' ? targetHeader : login;
    const role = targetLogin === login ? 'admin' : memberships.get(targetLogin)?.get(login);
    if (!role) throw new HttpError(404, `${login} cannot install on ${targetLogin}`);
    const target = new URL(fake.setupUrl);
    if (role === 'admin') {
      const existing = [...installations.values()].find((i) => i.account.login === targetLogin);
      const installation = existing ?? fake.install(targetLogin);
      target.searchParams.set('installation_id', String(installation.id));
      target.searchParams.set('setup_action', existing ? 'update' : 'install');
    } else {
      target.searchParams.set('setup_action', 'request');
    }
    const state = url.searchParams.get('state');
    if (state !== null) target.searchParams.set('state', state);
    if (options.oauth) target.searchParams.set('code', fake.oauthCode(login));
    res.writeHead(302, { location: target.href });
    res.end();
  }

  async function oauthExchange(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = (await readBody(req)).toString('utf8');
    const params: Record<string, unknown> = (req.headers['content-type'] ?? '').includes('json')
      ? (JSON.parse(raw) as Record<string, unknown>)
      : Object.fromEntries(new URLSearchParams(raw));
    if (
      !options.oauth ||
      params.client_id !== options.oauth.clientId ||
      params.client_secret !== options.oauth.clientSecret
    ) {
      return sendJson(res, 200, { error: 'incorrect_client_credentials' });
    }
    const login = typeof params.code === 'string' ? codes.get(params.code) : undefined;
    if (!login) return sendJson(res, 200, { error: 'bad_verification_code' });
    codes.delete(params.code as string);
    const token = `ghu_${randomBytes(18).toString('hex')}`;
    tokens.set(token, {
      kind: 'user',
      installation_id: null,
      login,
      repository_ids: null,
      permissions: {},
      expires_at: Date.now() + 8 * 60 * 60 * 1000,
    });
    return sendJson(res, 200, { access_token: token, token_type: 'bearer', scope: '' });
  }

  // --- git smart HTTP through `git http-backend` ------------------------------------------------

  function gitHttp(req: IncomingMessage, res: ServerResponse, url: URL): void {
    const match = /^\/([^/]+)\/([^/]+)\.git(\/.*)?$/.exec(url.pathname)!;
    const repo = [...repositories.values()].find((r) => r.full_name === `${match[1]}/${match[2]}`);
    const auth = req.headers.authorization ?? '';
    const basic = /^Basic\s+(\S+)$/i.exec(auth);
    const [user, password] = basic ? Buffer.from(basic[1]!, 'base64').toString('utf8').split(':', 2) : [];
    const token = password ? tokens.get(password) : undefined;
    const allowed =
      user === 'x-access-token' &&
      token !== undefined &&
      token.kind === 'installation' &&
      token.expires_at > Date.now() &&
      repo !== undefined &&
      tokenRepositoryIds(token).includes(repo.id);
    if (!allowed) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"', 'content-type': 'text/plain' });
      res.end('Invalid username or token.');
      return;
    }
    const child = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: `/${repo.owner.login}/${repo.name}.git${match[3] ?? ''}`,
        REQUEST_METHOD: req.method ?? 'GET',
        QUERY_STRING: url.search.replace(/^\?/, ''),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        REMOTE_USER: user,
        REMOTE_ADDR: '127.0.0.1',
        ...(req.headers['content-length'] ? { CONTENT_LENGTH: req.headers['content-length'] } : {}),
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    req.pipe(child.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    child.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const crlf = head.indexOf('\r\n\r\n');
      const lf = head.indexOf('\n\n');
      const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf + 4 : lf >= 0 ? lf + 2 : -1;
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('utf8').split(/\r?\n/)) {
        const colon = line.indexOf(':');
        if (colon <= 0) continue;
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        if (name === 'status') status = Number(value.split(' ')[0]);
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end));
    });
    child.on('close', () => {
      if (!headersDone) res.writeHead(500);
      res.end();
    });
  }

  // --- webhooks ---------------------------------------------------------------------------------

  const installationRef = (repo: FakeRepository) => {
    const installation = [...installations.values()].find((i) => installationRepositoryIds(i).includes(repo.id));
    return installation ? { installation: { id: installation.id, node_id: `I_${installation.id}` } } : {};
  };
  const sender = () =>
    shaped('webhook', 'simple-user', {
      login: 'octocat',
      id: 1,
      node_id: 'U_1',
      type: 'User',
      avatar_url: `${webUrl}/avatars/octocat.png`,
      url: `${apiUrl}/users/octocat`,
      html_url: `${webUrl}/octocat`,
    });
  /** A webhook payload, checked against GitHub's description of it as it is built. */
  const checked = (event: string, payload: Record<string, unknown>) => {
    check(`webhook ${event}`, schemas.webhook(event, payload));
    return payload;
  };
  // Installation webhooks list repositories in this short form.
  const listedRepository = (r: FakeRepository) => ({
    id: r.id,
    node_id: `R_${r.id}`,
    name: r.name,
    full_name: r.full_name,
    private: r.private,
  });

  const fake: FakeGitHub = {
    webUrl,
    apiUrl,
    setupUrl: `${webUrl}/setup-not-configured`,
    webhookUrl: `${webUrl}/webhook-not-configured`,
    accounts,
    memberships,
    repositories,
    installations,
    pulls,
    checkRuns,
    statuses,
    jwtsSeen,
    tokensIssued,
    requests,
    schemaProblems,

    account(login, type = 'User') {
      const existing = accounts.get(login);
      if (existing) return existing;
      const account: FakeAccount = {
        login,
        id: id(),
        type,
        avatar_url: `${webUrl}/avatars/${encodeURIComponent(login)}.png`,
      };
      accounts.set(login, account);
      return account;
    },

    addMember(org, login, role = 'member') {
      const organisation = fake.account(org, 'Organization');
      if (organisation.type !== 'Organization') throw new Error(`${org} is not an organisation`);
      fake.account(login);
      const members = memberships.get(org) ?? new Map<string, 'admin' | 'member'>();
      members.set(login, role);
      memberships.set(org, members);
    },

    addRepository(owner, name, opts = {}) {
      const account = fake.account(owner);
      const bare = createBareRepo(join(root, owner), name, opts);
      const repo: FakeRepository = {
        id: id(),
        owner: account,
        name,
        full_name: `${owner}/${name}`,
        private: opts.private ?? true,
        default_branch: opts.branch ?? 'main',
        bare,
      };
      repositories.set(repo.id, repo);
      return repo;
    },

    repository(fullName) {
      const repo = [...repositories.values()].find((r) => r.full_name === fullName);
      if (!repo) throw new Error(`fake GitHub has no repository ${fullName}`);
      return repo;
    },

    install(login, opts = {}) {
      const account = fake.account(login);
      const at = (opts.createdAt ?? new Date()).toISOString();
      const installation: FakeInstallation = {
        id: id(),
        account,
        repository_selection: opts.selection ?? 'all',
        repository_ids: opts.repositoryIds ?? [],
        suspended_at: null,
        created_at: at,
        updated_at: at,
      };
      installations.set(installation.id, installation);
      return installation;
    },

    cloneUrl: (fullName) => `${webUrl}/${fake.repository(fullName).full_name}.git`,

    branchSha: (fullName, branch) => branchSha(fake.repository(fullName), branch),

    oauthCode(login) {
      const code = randomBytes(10).toString('hex');
      codes.set(code, login);
      return code;
    },

    addCheckRun(fullName, sha, run) {
      const repo = fake.repository(fullName);
      const check: FakeCheckRun = {
        id: id(),
        repository_id: repo.id,
        head_sha: sha,
        name: run.name ?? 'ci',
        status: run.status ?? 'queued',
        conclusion: run.conclusion ?? null,
        details_url: run.details_url ?? `${webUrl}/${repo.full_name}/actions`,
        // GitHub stamps a check run when it is created, queued or not.
        started_at: run.started_at ?? new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
        completed_at: run.completed_at ?? null,
      };
      checkRuns.push(check);
      return check;
    },

    updateCheckRun(checkId, change) {
      const check = checkRuns.find((c) => c.id === checkId);
      if (!check) throw new Error(`no check run ${checkId}`);
      Object.assign(check, change);
      return check;
    },

    setStatus(fullName, sha, status) {
      const repo = fake.repository(fullName);
      const entry: FakeCommitStatus = {
        id: id(),
        repository_id: repo.id,
        sha,
        context: status.context,
        state: status.state,
        target_url: `${webUrl}/${repo.full_name}/status/${status.context}`,
        created_at: new Date().toISOString(),
      };
      statuses.push(entry);
      return entry;
    },

    failNext(method, path, { status, message, extra = {}, times = 1 }) {
      failures.push({ method, path, status, message, extra, left: times });
    },

    async sendWebhook(event, payload, opts = {}) {
      if (!opts.offSpec) check(`webhook ${event}`, schemas.webhook(event, payload));
      const delivery = opts.delivery ?? randomBytes(16).toString('hex');
      const body = JSON.stringify(payload);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'GitHub-Hookshot/fake',
        'x-github-event': event,
        'x-github-delivery': delivery,
        'x-github-hook-id': '1',
        'x-github-hook-installation-target-type': 'integration',
        'x-github-hook-installation-target-id': String(options.appId),
      };
      const signature = opts.signature ?? 'good';
      if (signature === 'good') headers['x-hub-signature-256'] = signWebhook(options.webhookSecret, body);
      if (signature === 'bad') headers['x-hub-signature-256'] = signWebhook(`${options.webhookSecret}x`, body);
      const res = await fetch(fake.webhookUrl, { method: 'POST', headers, body });
      return { status: res.status, body: await res.text(), delivery };
    },

    payloads: {
      checkRun(action, checkId) {
        const check = checkRuns.find((c) => c.id === checkId)!;
        const repo = repositories.get(check.repository_id)!;
        return checked('check_run', {
          action,
          check_run: webhookCheckRunJson(check),
          repository: webhookRepositoryJson(repo),
          ...installationRef(repo),
          sender: sender(),
        });
      },
      status(statusId) {
        const s = statuses.find((x) => x.id === statusId)!;
        const repo = repositories.get(s.repository_id)!;
        return checked('status', {
          id: s.id,
          sha: s.sha,
          name: repo.full_name,
          context: s.context,
          description: null,
          state: s.state,
          target_url: s.target_url,
          commit: shaped('webhook', 'webhook-status', {}).commit as Record<string, unknown>,
          branches: [],
          created_at: s.created_at,
          updated_at: s.created_at,
          repository: webhookRepositoryJson(repo),
          ...installationRef(repo),
          sender: sender(),
        });
      },
      pullRequest(action, fullName, number) {
        const repo = fake.repository(fullName);
        const pull = pulls.find((p) => p.repository_id === repo.id && p.number === number)!;
        return checked('pull_request', {
          action,
          number,
          pull_request: webhookPullJson(pull),
          repository: webhookRepositoryJson(repo),
          ...installationRef(repo),
          sender: sender(),
        });
      },
      installation(action, installationId) {
        const installation = installations.get(installationId)!;
        return checked('installation', {
          action,
          installation: installationJson(installation, 'webhook'),
          repositories: installationRepositoryIds(installation).map((rid) => listedRepository(repositories.get(rid)!)),
          sender: sender(),
        });
      },
      installationRepositories(action, installationId, repositoryIds) {
        const installation = installations.get(installationId)!;
        const list = repositoryIds.map((rid) => listedRepository(repositories.get(rid)!));
        return checked('installation_repositories', {
          action,
          installation: installationJson(installation, 'webhook'),
          repository_selection: installation.repository_selection,
          repositories_added: action === 'added' ? list : [],
          repositories_removed: action === 'removed' ? list : [],
          requester: null,
          sender: sender(),
        });
      },
      repository(action, repositoryId, extra = {}) {
        const repo = repositories.get(repositoryId)!;
        return checked('repository', {
          action,
          ...(action === 'edited' ? { changes: {} } : {}),
          // A rename says what the name was; the fake's repository already has the new one.
          ...(action === 'renamed' ? { changes: { repository: { name: { from: repo.name } } } } : {}),
          repository: webhookRepositoryJson(repo),
          ...installationRef(repo),
          sender: sender(),
          ...extra,
        });
      },
    },

    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
      if (schemaProblems.length > 0) {
        throw new Error(
          `the fake GitHub strayed from GitHub's descriptions:\n${[...new Set(schemaProblems)].join('\n')}`,
        );
      }
    },
  };
  return fake;
}

/**
 * What a client of the install flow keeps and sends: a random PKCE verifier, and its S256
 * challenge (base64url(SHA-256(verifier))) for `POST /v1/repohost/install-session`.
 */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** An RSA key pair like the one GitHub issues for an app (the private key in PKCS#1 PEM). */
export function generateAppKeyPair(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { privateKey, publicKey };
}

const pushEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: 'Threadwork Test',
  GIT_AUTHOR_EMAIL: 'test@threadwork.invalid',
  GIT_COMMITTER_NAME: 'Threadwork Test',
  GIT_COMMITTER_EMAIL: 'test@threadwork.invalid',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_TERMINAL_PROMPT: '0',
};

/**
 * What the runner does at the end of a run, with the real git over HTTP: clones `cloneUrl` with
 * the token as password, commits `files` on a new `branch` from `base`, pushes it, and returns
 * the base and the new commit. Asynchronous, so a fake GitHub in the same process can answer.
 */
export async function pushBranch(input: {
  cloneUrl: string;
  token: string;
  base: string;
  branch: string;
  files: Record<string, string>;
  message?: string;
}): Promise<{ baseRevision: string; revision: string }> {
  const work = mkdtempSync(join(tmpdir(), 'threadwork-push-'));
  const url = new URL(input.cloneUrl);
  url.username = 'x-access-token';
  url.password = input.token;
  const git = async (...args: string[]) =>
    (await execFileAsync('git', args, { cwd: work, env: pushEnv, encoding: 'utf8' })).stdout.trim();
  try {
    await git('clone', '--quiet', '--branch', input.base, url.href, '.');
    const baseRevision = await git('rev-parse', 'HEAD');
    await git('checkout', '--quiet', '-B', input.branch);
    for (const [path, content] of Object.entries(input.files)) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), content);
    }
    await git('add', '-A');
    await git('commit', '--quiet', '-m', input.message ?? 'threadwork candidate');
    await git('push', '--quiet', '--force', 'origin', `HEAD:refs/heads/${input.branch}`);
    return { baseRevision, revision: await git('rev-parse', 'HEAD') };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
