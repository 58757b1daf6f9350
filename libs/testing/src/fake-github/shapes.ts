import type { GitHubSchemas } from '../github-schemas.js';
import type { GitHubState } from './state.js';
import type {
  FakeAccount,
  FakeCheckRun,
  FakeCommitStatus,
  FakeInstallation,
  FakePull,
  FakeRepository,
} from './types.js';

// GitHub's objects differ between the REST answers and the webhook payloads: each builder takes
// the description it answers for, lays the fields the fake models over the schema's own
// placeholders, and the result is checked as it goes out.

export type Flavour = 'rest' | 'webhook';

export type Shapes = ReturnType<typeof createShapes>;

export function createShapes(
  state: GitHubState,
  schemas: GitHubSchemas,
  app: { appId: number; slug: string },
  apiUrl: string,
) {
  const webUrl = state.webUrl;

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
      app_id: app.appId,
      app_slug: app.slug,
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

  /** The fields every pull-request shape has; `merged` and mergeability only on a single pull. */
  const pullFields = (p: FakePull, flavour: Flavour) => {
    const repo = state.repositories.get(p.repository_id)!;
    const headSha = state.branchSha(repo, p.head) ?? '0'.repeat(40);
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
      base: ref(p.base, state.branchSha(repo, p.base) ?? '0'.repeat(40)),
      user: shaped(flavour, 'simple-user', { login: `${app.slug}[bot]`, id: 1, type: 'Bot' }),
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
    const repo = state.repositories.get(c.repository_id)!;
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
      pull_requests: state.pulls
        .filter(
          (p) => p.repository_id === repo.id && p.state === 'open' && state.branchSha(repo, p.head) === c.head_sha,
        )
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
              sha: state.branchSha(repo, p.base) ?? '0'.repeat(40),
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

  return {
    accountJson,
    repositoryJson,
    minimalRepositoryJson,
    webhookRepositoryJson,
    installationJson,
    pullJson,
    pullSimpleJson,
    webhookPullJson,
    checkRunJson,
    webhookCheckRunJson,
    statusJson,
    shaped,
  };
}
