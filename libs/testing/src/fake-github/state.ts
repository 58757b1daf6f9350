import { execFileSync } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { join } from 'node:path';
import { createBareRepo, type BareRepoOptions } from '../git.js';
import { HttpError } from './http.js';
import type {
  FakeAccount,
  FakeCheckRun,
  FakeCommitStatus,
  FakeInstallation,
  FakePull,
  FakeRepository,
} from './types.js';

// Everything the fake GitHub knows, and the changes a test or a request makes to it. The API,
// the web pages, git and the webhooks all read this one record, so what one shows the others agree
// with.

const SHA = /^[0-9a-f]{40}$/;

export interface IssuedToken {
  kind: 'installation' | 'user';
  installation_id: number | null;
  login: string | null;
  /** Null: every repository of the installation. */
  repository_ids: number[] | null;
  permissions: Record<string, string>;
  expires_at: number;
}

/** A code of the OAuth web flow: single use, ten minutes, tied to the redirect URI it went to. */
export interface OAuthCode {
  login: string;
  redirect_uri: string | null;
  expires_at: number;
}

/** GitHub's lifetime of an OAuth web-flow code. */
export const OAUTH_CODE_TTL_MS = 10 * 60 * 1000;

/** A failure a test asked for (`failNext`), answered in place of the next matching requests. */
export interface PlannedFailure {
  method: string;
  path: RegExp;
  status: number;
  message: string;
  extra: Record<string, unknown>;
  left: number;
}

/** A request a test holds (`holdNext`): answered as the state was when it came, once released. */
export interface PlannedHold {
  method: string;
  path: RegExp;
  arrived: () => void;
  released: Promise<void>;
  taken: boolean;
}

export class GitHubState {
  readonly accounts = new Map<string, FakeAccount>();
  readonly memberships = new Map<string, Map<string, 'admin' | 'member'>>();
  readonly repositories = new Map<number, FakeRepository>();
  readonly installations = new Map<number, FakeInstallation>();
  readonly pulls: FakePull[] = [];
  readonly checkRuns: FakeCheckRun[] = [];
  readonly statuses: FakeCommitStatus[] = [];
  readonly tokens = new Map<string, IssuedToken>();
  /** OAuth code → whom it signs in, the redirect URI it was issued for (if any), and its expiry. */
  readonly codes = new Map<string, OAuthCode>();
  readonly jwtsSeen = new Set<string>();
  readonly tokensIssued = new Map<number, number>();
  readonly requests: string[] = [];
  readonly schemaProblems: string[] = [];
  readonly failures: PlannedFailure[] = [];
  readonly holds: PlannedHold[] = [];
  // Ids start at random, so ids of one fake never pass for another's in a test sharing services.
  private lastId = randomInt(100_000, 900_000);

  constructor(
    /** Where the bare repositories live, one directory per owner. */
    readonly root: string,
    readonly webUrl: string,
  ) {}

  nextId(): number {
    return ++this.lastId;
  }

  /** Records where an answer or a webhook strayed from GitHub's description of it. */
  check(what: string, problems: string[]): void {
    for (const problem of problems) this.schemaProblems.push(`${what}: ${problem}`);
  }

  account(login: string, type: FakeAccount['type'] = 'User'): FakeAccount {
    const existing = this.accounts.get(login);
    if (existing) return existing;
    const account: FakeAccount = {
      login,
      id: this.nextId(),
      type,
      avatar_url: `${this.webUrl}/avatars/${encodeURIComponent(login)}.png`,
    };
    this.accounts.set(login, account);
    return account;
  }

  addMember(org: string, login: string, role: 'admin' | 'member' = 'member'): void {
    const organisation = this.account(org, 'Organization');
    if (organisation.type !== 'Organization') throw new Error(`${org} is not an organisation`);
    this.account(login);
    const members = this.memberships.get(org) ?? new Map<string, 'admin' | 'member'>();
    members.set(login, role);
    this.memberships.set(org, members);
  }

  addRepository(owner: string, name: string, opts: BareRepoOptions & { private?: boolean } = {}): FakeRepository {
    const account = this.account(owner);
    const bare = createBareRepo(join(this.root, owner), name, opts);
    const repo: FakeRepository = {
      id: this.nextId(),
      owner: account,
      name,
      full_name: `${owner}/${name}`,
      private: opts.private ?? true,
      default_branch: opts.branch ?? 'main',
      bare,
    };
    this.repositories.set(repo.id, repo);
    return repo;
  }

  repository(fullName: string): FakeRepository {
    const repo = [...this.repositories.values()].find((r) => r.full_name === fullName);
    if (!repo) throw new Error(`fake GitHub has no repository ${fullName}`);
    return repo;
  }

  install(
    login: string,
    opts: { selection?: 'all' | 'selected'; repositoryIds?: number[]; createdAt?: Date } = {},
  ): FakeInstallation {
    const account = this.account(login);
    const at = (opts.createdAt ?? new Date()).toISOString();
    const installation: FakeInstallation = {
      id: this.nextId(),
      account,
      repository_selection: opts.selection ?? 'all',
      repository_ids: opts.repositoryIds ?? [],
      suspended_at: null,
      created_at: at,
      updated_at: at,
    };
    this.installations.set(installation.id, installation);
    return installation;
  }

  oauthCode(login: string, redirectUri: string | null = null): string {
    const code = randomBytes(10).toString('hex');
    this.codes.set(code, { login, redirect_uri: redirectUri, expires_at: Date.now() + OAUTH_CODE_TTL_MS });
    return code;
  }

  /**
   * A user changes their login, as GitHub allows: the account keeps its id, and the tokens and
   * codes issued to it follow it. Only for users who own no repository (whose names would change).
   */
  renameAccount(from: string, to: string): FakeAccount {
    const account = this.accounts.get(from);
    if (!account || account.type !== 'User') throw new Error(`fake GitHub has no user ${from}`);
    if (this.accounts.has(to)) throw new Error(`fake GitHub already has an account ${to}`);
    if ([...this.repositories.values()].some((r) => r.owner.id === account.id)) {
      throw new Error(`${from} owns repositories; renaming them is not modelled`);
    }
    this.accounts.delete(from);
    account.login = to;
    account.avatar_url = `${this.webUrl}/avatars/${encodeURIComponent(to)}.png`;
    this.accounts.set(to, account);
    for (const members of this.memberships.values()) {
      const role = members.get(from);
      if (role) {
        members.delete(from);
        members.set(to, role);
      }
    }
    for (const token of this.tokens.values()) if (token.login === from) token.login = to;
    for (const code of this.codes.values()) if (code.login === from) code.login = to;
    return account;
  }

  addCheckRun(fullName: string, sha: string, run: Partial<Omit<FakeCheckRun, 'id' | 'repository_id'>>): FakeCheckRun {
    const repo = this.repository(fullName);
    const check: FakeCheckRun = {
      id: this.nextId(),
      repository_id: repo.id,
      head_sha: sha,
      name: run.name ?? 'ci',
      status: run.status ?? 'queued',
      conclusion: run.conclusion ?? null,
      details_url: run.details_url ?? `${this.webUrl}/${repo.full_name}/actions`,
      // GitHub stamps a check run when it is created, queued or not.
      started_at: run.started_at ?? new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
      completed_at: run.completed_at ?? null,
    };
    this.checkRuns.push(check);
    return check;
  }

  updateCheckRun(checkId: number, change: Partial<Omit<FakeCheckRun, 'id' | 'repository_id'>>): FakeCheckRun {
    const check = this.checkRuns.find((c) => c.id === checkId);
    if (!check) throw new Error(`no check run ${checkId}`);
    Object.assign(check, change);
    return check;
  }

  setStatus(fullName: string, sha: string, status: Pick<FakeCommitStatus, 'context' | 'state'>): FakeCommitStatus {
    const repo = this.repository(fullName);
    const entry: FakeCommitStatus = {
      id: this.nextId(),
      repository_id: repo.id,
      sha,
      context: status.context,
      state: status.state,
      target_url: `${this.webUrl}/${repo.full_name}/status/${status.context}`,
      created_at: new Date().toISOString(),
    };
    this.statuses.push(entry);
    return entry;
  }

  /** The commit a branch points at, read from the bare repository (git is the truth), or null. */
  branchSha(repo: FakeRepository, branch: string): string | null {
    try {
      return execFileSync(
        'git',
        ['--git-dir', repo.bare, 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}^{commit}`],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] },
      ).trim();
    } catch {
      return null;
    }
  }

  /** A commit sha as given, or the one a branch (`main`, `heads/main`, `refs/heads/main`) points at. */
  resolveRef(repo: FakeRepository, ref: string): string {
    if (SHA.test(ref)) return ref;
    const sha = this.branchSha(repo, ref.replace(/^refs\/heads\//, '').replace(/^heads\//, ''));
    if (!sha) throw new HttpError(422, `No commit found for SHA: ${ref}`);
    return sha;
  }

  installationRepositoryIds(installation: FakeInstallation): number[] {
    if (installation.repository_selection === 'selected') return [...installation.repository_ids];
    return [...this.repositories.values()].filter((r) => r.owner.id === installation.account.id).map((r) => r.id);
  }

  tokenRepositoryIds(token: IssuedToken): number[] {
    const installation = token.installation_id === null ? undefined : this.installations.get(token.installation_id);
    if (!installation || installation.suspended_at) return [];
    const all = this.installationRepositoryIds(installation);
    return token.repository_ids === null ? all : all.filter((id) => token.repository_ids!.includes(id));
  }
}
