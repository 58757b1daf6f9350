import type { IncomingMessage } from 'node:http';
import type { GitHubSchemas } from '../github-schemas.js';
import type { Auth } from './auth.js';
import { HttpError } from './http.js';
import type { Shapes } from './shapes.js';
import type { GitHubState } from './state.js';
import type { FakeCommitStatus, FakePull, FakeRepository } from './types.js';

// The REST endpoints Threadwork calls, one row each: the method, the path (after `/api/v3`), and
// GitHub's template for it, under which its success answer is checked against the description.

export interface RestCall {
  req: IncomingMessage;
  /** The path's captures. */
  params: string[];
  query: URLSearchParams;
  body: Record<string, unknown>;
}

interface Answer {
  status: number;
  body: unknown;
}

interface Route {
  method: string;
  path: RegExp;
  template: string;
  handle(call: RestCall): Answer;
}

const ok = (body: unknown): Answer => ({ status: 200, body });

/** One page of `items` as GitHub pages: `per_page` (at most 100, default 30) and `page` from 1. */
function pageOf<T>(items: T[], query: URLSearchParams): T[] {
  const perPage = Math.min(100, Number(query.get('per_page') ?? 30));
  const page = Math.max(1, Number(query.get('page') ?? 1));
  return items.slice((page - 1) * perPage, page * perPage);
}

export function createRestApi(state: GitHubState, shapes: Shapes, schemas: GitHubSchemas, auth: Auth, apiUrl: string) {
  const { requireJwt, requireToken, repoFor, issueToken } = auth;
  const { accountJson, shaped } = shapes;

  const pullOf = (repo: FakeRepository, number: string): FakePull => {
    const pull = state.pulls.find((p) => p.repository_id === repo.id && p.number === Number(number));
    if (!pull) throw new HttpError(404, 'Not Found');
    return pull;
  };

  const routes: Route[] = [
    {
      method: 'GET',
      path: /^\/app\/installations\/(\d+)$/,
      template: '/app/installations/{installation_id}',
      handle({ req, params }) {
        requireJwt(req);
        const installation = state.installations.get(Number(params[0]));
        if (!installation) throw new HttpError(404, 'Not Found');
        return ok(shapes.installationJson(installation));
      },
    },
    {
      method: 'POST',
      path: /^\/app\/installations\/(\d+)\/access_tokens$/,
      template: '/app/installations/{installation_id}/access_tokens',
      handle({ req, params, body }) {
        requireJwt(req);
        const installation = state.installations.get(Number(params[0]));
        if (!installation) throw new HttpError(404, 'Not Found');
        return { status: 201, body: issueToken(installation, body) };
      },
    },
    {
      method: 'GET',
      path: /^\/installation\/repositories$/,
      template: '/installation/repositories',
      handle({ req, query }) {
        const token = requireToken(req, 'installation');
        const installation = state.installations.get(token.installation_id!)!;
        const all = state.tokenRepositoryIds(token).map((rid) => state.repositories.get(rid)!);
        return ok({
          total_count: all.length,
          repository_selection: installation.repository_selection,
          repositories: pageOf(all, query).map(shapes.repositoryJson),
        });
      },
    },
    {
      method: 'GET',
      path: /^\/user$/,
      template: '/user',
      handle({ req }) {
        const user = state.accounts.get(requireToken(req, 'user').login!)!;
        return ok(
          shaped('rest', 'public-user', {
            ...accountJson(user),
            name: null,
            created_at: '2020-01-01T00:00:00Z',
            updated_at: '2020-01-01T00:00:00Z',
          }),
        );
      },
    },
    {
      method: 'GET',
      path: /^\/user\/installations$/,
      template: '/user/installations',
      handle({ req, query }) {
        const user = state.accounts.get(requireToken(req, 'user').login!)!;
        // Installations the user can reach: on their own account, and on organisations they belong to.
        const visible = [...state.installations.values()].filter(
          (i) => i.account.id === user.id || state.memberships.get(i.account.login)?.has(user.login) === true,
        );
        return ok({
          total_count: visible.length,
          installations: pageOf(visible, query).map((i) => shapes.installationJson(i)),
        });
      },
    },
    {
      method: 'GET',
      path: /^\/user\/memberships\/orgs\/([^/]+)$/,
      template: '/user/memberships/orgs/{org}',
      handle({ req, params }) {
        const user = state.accounts.get(requireToken(req, 'user').login!)!;
        const org = state.accounts.get(params[0]!);
        const role = org?.type === 'Organization' ? state.memberships.get(org.login)?.get(user.login) : undefined;
        // GitHub answers a user who is no member of the organisation (or of no organisation) 404.
        if (!org || !role) throw new HttpError(404, 'Not Found');
        return ok(
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
      },
    },
    {
      method: 'GET',
      path: /^\/repos\/([^/]+)\/([^/]+)\/pulls$/,
      template: '/repos/{owner}/{repo}/pulls',
      handle({ req, params, query }) {
        const repo = repoFor(req, params[0]!, params[1]!);
        const wanted = query.get('state') ?? 'open';
        const head = query.get('head');
        const base = query.get('base');
        const found = state.pulls.filter(
          (p) =>
            p.repository_id === repo.id &&
            (wanted === 'all' || p.state === wanted) &&
            (head === null || `${repo.owner.login}:${p.head}` === head) &&
            (base === null || p.base === base),
        );
        return ok(found.map(shapes.pullSimpleJson));
      },
    },
    {
      method: 'POST',
      path: /^\/repos\/([^/]+)\/([^/]+)\/pulls$/,
      template: '/repos/{owner}/{repo}/pulls',
      handle({ req, params, body }) {
        const repo = repoFor(req, params[0]!, params[1]!);
        return { status: 201, body: shapes.pullJson(createPull(state, repo, body)) };
      },
    },
    {
      method: 'GET',
      path: /^\/repos\/([^/]+)\/([^/]+)\/pulls\/(\d+)$/,
      template: '/repos/{owner}/{repo}/pulls/{pull_number}',
      handle({ req, params }) {
        return ok(shapes.pullJson(pullOf(repoFor(req, params[0]!, params[1]!), params[2]!)));
      },
    },
    {
      method: 'PATCH',
      path: /^\/repos\/([^/]+)\/([^/]+)\/pulls\/(\d+)$/,
      template: '/repos/{owner}/{repo}/pulls/{pull_number}',
      handle({ req, params, body }) {
        const pull = pullOf(repoFor(req, params[0]!, params[1]!), params[2]!);
        if (typeof body.title === 'string') pull.title = body.title;
        if (typeof body.body === 'string') pull.body = body.body;
        if (body.state === 'open' || body.state === 'closed') {
          if (pull.merged) throw new HttpError(422, 'Validation Failed');
          pull.state = body.state;
        }
        pull.updated_at = new Date().toISOString();
        return ok(shapes.pullJson(pull));
      },
    },
    {
      method: 'GET',
      path: /^\/repos\/([^/]+)\/([^/]+)\/commits\/([^/]+)\/check-runs$/,
      template: '/repos/{owner}/{repo}/commits/{ref}/check-runs',
      handle({ req, params }) {
        const repo = repoFor(req, params[0]!, params[1]!);
        const sha = state.resolveRef(repo, decodeURIComponent(params[2]!));
        const runs = state.checkRuns.filter((c) => c.repository_id === repo.id && c.head_sha === sha);
        return ok({ total_count: runs.length, check_runs: runs.map(shapes.checkRunJson) });
      },
    },
    {
      method: 'GET',
      path: /^\/repos\/([^/]+)\/([^/]+)\/commits\/([^/]+)\/status$/,
      template: '/repos/{owner}/{repo}/commits/{ref}/status',
      handle({ req, params }) {
        const repo = repoFor(req, params[0]!, params[1]!);
        const sha = state.resolveRef(repo, decodeURIComponent(params[2]!));
        // Latest per context, newest first, like GitHub's combined status.
        const latest = new Map<string, FakeCommitStatus>();
        for (const s of state.statuses.filter((x) => x.repository_id === repo.id && x.sha === sha)) {
          latest.set(s.context, s);
        }
        const list = [...latest.values()].reverse();
        const combined = list.some((s) => s.state === 'error' || s.state === 'failure')
          ? 'failure'
          : list.length === 0 || list.some((s) => s.state === 'pending')
            ? 'pending'
            : 'success';
        return ok(
          shaped('rest', 'combined-commit-status', {
            state: combined,
            sha,
            total_count: list.length,
            statuses: list.map(shapes.statusJson),
            repository: shapes.minimalRepositoryJson(repo),
            url: `${apiUrl}/repos/${repo.full_name}/commits/${sha}/status`,
            commit_url: `${apiUrl}/repos/${repo.full_name}/commits/${sha}`,
          }),
        );
      },
    },
  ];

  /** Answers an API call (`path` after `/api/v3`), its success checked against GitHub's description. */
  return function answer(call: Omit<RestCall, 'params'>, path: string): Answer {
    const method = call.req.method ?? 'GET';
    for (const route of routes) {
      const match = route.method === method ? route.path.exec(path) : null;
      if (!match) continue;
      const result = route.handle({ ...call, params: match.slice(1) });
      state.check(
        `${method} ${route.template} ${result.status}`,
        schemas.response(method, route.template, result.status, result.body),
      );
      return result;
    }
    throw new HttpError(404, 'Not Found');
  };
}

function createPull(state: GitHubState, repo: FakeRepository, body: Record<string, unknown>): FakePull {
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
  if (!head || state.branchSha(repo, head) === null) throw invalid('head');
  if (!base || state.branchSha(repo, base) === null) throw invalid('base');
  if (
    state.pulls.some((p) => p.repository_id === repo.id && p.state === 'open' && p.head === head && p.base === base)
  ) {
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
    id: state.nextId(),
    number: state.pulls.filter((p) => p.repository_id === repo.id).length + 1,
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
  state.pulls.push(pull);
  return pull;
}
