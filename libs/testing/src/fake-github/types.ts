import type { KeyObject } from 'node:crypto';
import type { BareRepoOptions } from '../git.js';

// What a test sees of the fake GitHub: its records, as the fake keeps them (not in GitHub's
// shapes, which are built from them as answers go out), and the handle `startFakeGitHub` returns.

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
  /**
   * The app's Callback URL: the authorize page sends the browser back to it, and refuses any other
   * `redirect_uri` (`error=redirect_uri_mismatch`).
   */
  callbackUrl: string;
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
  /** The user changes their login on GitHub; the account keeps its id (users without repositories only). */
  renameAccount(from: string, to: string): FakeAccount;
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
  /**
   * Holds the next API request matching `method` and `path`: it is answered as the state was when
   * it came (`arrived`), but only once `release` is called, as a slow network would deliver it.
   */
  holdNext(method: string, path: RegExp): { arrived: Promise<void>; release: () => void };
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
