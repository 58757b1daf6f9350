import { createHmac, randomBytes } from 'node:crypto';
import type { GitHubSchemas } from '../github-schemas.js';
import type { Shapes } from './shapes.js';
import type { GitHubState } from './state.js';
import type { FakeGitHub, FakeRepository } from './types.js';

// Webhooks as GitHub sends them to the app: payloads built from the fake's state, checked against
// GitHub's descriptions, signed with the app's secret.

/** The webhook signature GitHub sends in `X-Hub-Signature-256`. */
export function signWebhook(secret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export function createWebhooks(
  state: GitHubState,
  shapes: Shapes,
  schemas: GitHubSchemas,
  app: { appId: number; webhookSecret: string },
  urls: { apiUrl: string; webhookUrl: () => string },
): Pick<FakeGitHub, 'sendWebhook' | 'payloads'> {
  const { webUrl } = state;
  const { apiUrl, webhookUrl } = urls;
  const installationRef = (repo: FakeRepository) => {
    const installation = [...state.installations.values()].find((i) =>
      state.installationRepositoryIds(i).includes(repo.id),
    );
    return installation ? { installation: { id: installation.id, node_id: `I_${installation.id}` } } : {};
  };
  const sender = () =>
    shapes.shaped('webhook', 'simple-user', {
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
    state.check(`webhook ${event}`, schemas.webhook(event, payload));
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

  return {
    async sendWebhook(event, payload, opts = {}) {
      if (!opts.offSpec) state.check(`webhook ${event}`, schemas.webhook(event, payload));
      const delivery = opts.delivery ?? randomBytes(16).toString('hex');
      const body = JSON.stringify(payload);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'GitHub-Hookshot/fake',
        'x-github-event': event,
        'x-github-delivery': delivery,
        'x-github-hook-id': '1',
        'x-github-hook-installation-target-type': 'integration',
        'x-github-hook-installation-target-id': String(app.appId),
      };
      const signature = opts.signature ?? 'good';
      if (signature === 'good') headers['x-hub-signature-256'] = signWebhook(app.webhookSecret, body);
      if (signature === 'bad') headers['x-hub-signature-256'] = signWebhook(`${app.webhookSecret}x`, body);
      const res = await fetch(webhookUrl(), { method: 'POST', headers, body });
      return { status: res.status, body: await res.text(), delivery };
    },

    payloads: {
      checkRun(action, checkId) {
        const check = state.checkRuns.find((c) => c.id === checkId)!;
        const repo = state.repositories.get(check.repository_id)!;
        return checked('check_run', {
          action,
          check_run: shapes.webhookCheckRunJson(check),
          repository: shapes.webhookRepositoryJson(repo),
          ...installationRef(repo),
          sender: sender(),
        });
      },
      status(statusId) {
        const s = state.statuses.find((x) => x.id === statusId)!;
        const repo = state.repositories.get(s.repository_id)!;
        return checked('status', {
          id: s.id,
          sha: s.sha,
          name: repo.full_name,
          context: s.context,
          description: null,
          state: s.state,
          target_url: s.target_url,
          commit: shapes.shaped('webhook', 'webhook-status', {}).commit as Record<string, unknown>,
          branches: [],
          created_at: s.created_at,
          updated_at: s.created_at,
          repository: shapes.webhookRepositoryJson(repo),
          ...installationRef(repo),
          sender: sender(),
        });
      },
      pullRequest(action, fullName, number) {
        const repo = state.repository(fullName);
        const pull = state.pulls.find((p) => p.repository_id === repo.id && p.number === number)!;
        return checked('pull_request', {
          action,
          number,
          pull_request: shapes.webhookPullJson(pull),
          repository: shapes.webhookRepositoryJson(repo),
          ...installationRef(repo),
          sender: sender(),
        });
      },
      installation(action, installationId) {
        const installation = state.installations.get(installationId)!;
        return checked('installation', {
          action,
          installation: shapes.installationJson(installation, 'webhook'),
          repositories: state
            .installationRepositoryIds(installation)
            .map((rid) => listedRepository(state.repositories.get(rid)!)),
          sender: sender(),
        });
      },
      installationRepositories(action, installationId, repositoryIds) {
        const installation = state.installations.get(installationId)!;
        const list = repositoryIds.map((rid) => listedRepository(state.repositories.get(rid)!));
        return checked('installation_repositories', {
          action,
          installation: shapes.installationJson(installation, 'webhook'),
          repository_selection: installation.repository_selection,
          repositories_added: action === 'added' ? list : [],
          repositories_removed: action === 'removed' ? list : [],
          requester: null,
          sender: sender(),
        });
      },
      repository(action, repositoryId, extra = {}) {
        const repo = state.repositories.get(repositoryId)!;
        return checked('repository', {
          action,
          ...(action === 'edited' ? { changes: {} } : {}),
          // A rename says what the name was; the fake's repository already has the new one.
          ...(action === 'renamed' ? { changes: { repository: { name: { from: repo.name } } } } : {}),
          repository: shapes.webhookRepositoryJson(repo),
          ...installationRef(repo),
          sender: sender(),
          ...extra,
        });
      },
    },
  };
}
