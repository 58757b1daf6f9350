import { githubSchemas } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import {
  CheckRunEventPayload,
  CheckSuiteEventPayload,
  GhCheckRun,
  GhCommitStatus,
  GhInstallation,
  GhOrgMembership,
  GhPull,
  GhRepository,
  InstallationEventPayload,
  InstallationRepositoriesPayload,
  PullRequestEventPayload,
  RepositoryEventPayload,
  StatusEventPayload,
} from './shapes.js';

// Every shape GitHub's published descriptions allow for what repohost reads must parse. The
// samples are the least each description admits — null wherever null is allowed, optional fields
// absent, empty strings — checked valid against the description first, then parsed; and the
// alternatives the descriptions name (an enterprise as an installation's account) or GitHub is
// known to send (Unix seconds in installation webhooks).

const schemas = githubSchemas();

function parses(schema: z.ZodType, value: unknown): void {
  const result = schema.safeParse(value);
  expect(result.success, result.success ? '' : JSON.stringify(result.error.issues.slice(0, 3))).toBe(true);
}

/** An enterprise account as each description has it (REST and webhooks describe it differently). */
const enterprise = (flavour: 'rest' | 'webhook' = 'rest') =>
  (flavour === 'rest' ? schemas.restShape : schemas.webhookShape)('enterprise', {
    id: 77,
    slug: 'acme-corp',
    name: 'Acme Corp',
    avatar_url: 'https://avatars.example/acme.png',
  });

describe('REST answers', () => {
  const cases: [string, z.ZodType, string, string, string, (value: Record<string, unknown>) => unknown][] = [
    ['installation', GhInstallation, 'GET', '/app/installations/{installation_id}', 'installation', (v) => v],
    [
      'repository',
      GhRepository,
      'GET',
      '/installation/repositories',
      'repository',
      (v) => ({
        total_count: 1,
        repositories: [v],
      }),
    ],
    ['organisation membership', GhOrgMembership, 'GET', '/user/memberships/orgs/{org}', 'org-membership', (v) => v],
    ['pull request', GhPull, 'GET', '/repos/{owner}/{repo}/pulls/{pull_number}', 'pull-request', (v) => v],
    ['pull request in a list', GhPull, 'GET', '/repos/{owner}/{repo}/pulls', 'pull-request-simple', (v) => [v]],
    [
      'check run',
      GhCheckRun,
      'GET',
      '/repos/{owner}/{repo}/commits/{ref}/check-runs',
      'check-run',
      (v) => ({
        total_count: 1,
        check_runs: [v],
      }),
    ],
  ];
  for (const [name, schema, method, path, component, wrap] of cases) {
    it(`reads the least ${name} GitHub describes`, () => {
      const sample = schemas.restShape(component, {});
      expect(schemas.response(method, path, 200, wrap(sample))).toEqual([]);
      parses(schema, sample);
    });
  }

  it('reads the least commit status GitHub describes', () => {
    const sample = schemas.restShape('simple-commit-status', {});
    const combined = schemas.restShape('combined-commit-status', { statuses: [sample] });
    expect(schemas.response('GET', '/repos/{owner}/{repo}/commits/{ref}/status', 200, combined)).toEqual([]);
    parses(GhCommitStatus, sample);
  });

  it('reads an installation on an enterprise account (a slug, no login) as that slug', () => {
    const sample = schemas.restShape('installation', { account: enterprise(), target_type: 'Enterprise' });
    expect(schemas.response('GET', '/app/installations/{installation_id}', 200, sample)).toEqual([]);
    expect(GhInstallation.parse(sample).account).toMatchObject({ login: 'acme-corp', id: 77 });
  });

  it('reads a pull request list item with no merged flag, merged by its merged_at', () => {
    const sample = schemas.restShape('pull-request-simple', { merged_at: '2026-01-02T03:04:05Z' });
    expect(sample).not.toHaveProperty('merged');
    expect(GhPull.parse(sample).merged_at).toBe('2026-01-02T03:04:05Z');
  });
});

describe('webhook payloads', () => {
  const cases: [string, z.ZodType, string[]][] = [
    [
      'installation',
      InstallationEventPayload,
      ['created', 'deleted', 'suspend', 'unsuspend', 'new_permissions_accepted'],
    ],
    ['installation_repositories', InstallationRepositoriesPayload, ['added', 'removed']],
    ['repository', RepositoryEventPayload, ['edited', 'renamed', 'deleted', 'privatized', 'publicized', 'archived']],
    ['pull_request', PullRequestEventPayload, ['opened', 'closed', 'reopened', 'synchronize', 'ready_for_review']],
    ['check_run', CheckRunEventPayload, ['created', 'completed', 'rerequested']],
    ['check_suite', CheckSuiteEventPayload, ['completed', 'requested', 'rerequested']],
  ];
  for (const [event, schema, actions] of cases) {
    for (const action of actions) {
      it(`reads the least ${event}.${action} GitHub describes`, () => {
        const sample = schemas.webhookShape(`webhook-${event.replaceAll('_', '-')}-${action.replaceAll('_', '-')}`, {});
        expect(schemas.webhook(event, sample)).toEqual([]);
        parses(schema, sample);
      });
    }
  }

  it('reads the least status GitHub describes', () => {
    const sample = schemas.webhookShape('webhook-status', {});
    expect(schemas.webhook('status', sample)).toEqual([]);
    parses(StatusEventPayload, sample);
  });

  it('reads an installation webhook whose times are Unix seconds, as GitHub sends them', () => {
    const sample = schemas.webhookShape('webhook-installation-deleted', {});
    const installation = { ...(sample.installation as object), created_at: 1_501_449_845, updated_at: 1_501_449_845 };
    const parsed = InstallationEventPayload.parse({ ...sample, installation });
    expect(parsed.installation.created_at).toBe('2017-07-30T21:24:05.000Z');
    const suspended = InstallationEventPayload.parse({
      ...sample,
      installation: { ...installation, suspended_at: 1_501_449_900 },
    });
    expect(suspended.installation.suspended_at).toBe('2017-07-30T21:25:00.000Z');
  });

  it('reads an installation webhook on an enterprise account', () => {
    const sample = schemas.webhookShape('webhook-installation-created', {
      installation: schemas.webhookShape('installation', { account: enterprise('webhook'), target_type: 'Enterprise' }),
    });
    expect(schemas.webhook('installation', sample)).toEqual([]);
    expect(InstallationEventPayload.parse(sample).installation.account).toMatchObject({ login: 'acme-corp' });
  });
});

describe('the descriptions themselves', () => {
  it('catch what a fake would invent: merged and mergeability on the pull request list', () => {
    const item = { ...schemas.restShape('pull-request-simple', {}), merged: false, mergeable: true };
    expect(schemas.response('GET', '/repos/{owner}/{repo}/pulls', 200, [item])).toEqual([
      '/0 must NOT have additional properties: merged',
      '/0 must NOT have additional properties: mergeable',
    ]);
  });

  it('say nothing of an operation GitHub does not have', () => {
    expect(schemas.response('GET', '/repos/{owner}/{repo}/nothing', 200, {})).toEqual([
      'GitHub describes no 200 answer to GET /repos/{owner}/{repo}/nothing',
    ]);
  });
});
