import { z } from 'zod';

// The fields of GitHub's REST answers and webhook payloads that repohost reads, parsed so that a
// changed or unexpected answer fails loudly here instead of as an undefined deep in the code. Each
// accepts every shape GitHub's descriptions allow for it (checked in shapes.test.ts against
// `@octokit/openapi` and `@octokit/openapi-webhooks`), and what GitHub is known to send besides.

/**
 * A time, as an ISO 8601 string. GitHub's descriptions say strings, but installation webhooks
 * carry `created_at`/`updated_at` as Unix seconds: both are read, and seconds become a string.
 */
const GhTime = z.union([
  z.string(),
  z
    .number()
    .int()
    .nonnegative()
    .transform((seconds) => new Date(seconds * 1000).toISOString()),
]);

export const GhAccount = z.object({
  login: z.string(),
  id: z.number().int(),
  avatar_url: z.string(),
  type: z.string().optional(),
});
export type GhAccount = z.infer<typeof GhAccount>;

/**
 * An enterprise, which an installation's `account` may be instead of a user or organisation: it
 * has a slug and a name, no login. Read as an account whose login is the slug.
 */
const GhEnterprise = z
  .object({ id: z.number().int(), slug: z.string(), avatar_url: z.string() })
  .transform(({ id, slug, avatar_url }) => ({ login: slug, id, avatar_url, type: 'Enterprise' }));

export const GhInstallation = z.object({
  id: z.number().int().positive(),
  account: z.union([GhAccount, GhEnterprise]).nullable(),
  repository_selection: z.string(),
  html_url: z.string(),
  target_type: z.string(),
  created_at: GhTime,
  suspended_at: GhTime.nullable().optional(),
});
export type GhInstallation = z.infer<typeof GhInstallation>;

/** The authenticated user's membership of an organisation: `state` active or pending, `role` admin, member, … */
export const GhOrgMembership = z.object({ state: z.string(), role: z.string() });
export type GhOrgMembership = z.infer<typeof GhOrgMembership>;

export const GhRepository = z.object({
  id: z.number().int().positive(),
  name: z.string(),
  full_name: z.string(),
  owner: GhAccount,
  private: z.boolean(),
  clone_url: z.string(),
  default_branch: z.string(),
});
export type GhRepository = z.infer<typeof GhRepository>;

export const GhPull = z.object({
  number: z.number().int().positive(),
  html_url: z.string(),
  state: z.string(),
  draft: z.boolean().optional(),
  merged: z.boolean().optional(),
  merged_at: z.string().nullable().optional(),
  mergeable: z.boolean().nullable().optional(),
  mergeable_state: z.string().optional(),
  head: z.object({ ref: z.string(), sha: z.string() }),
  base: z.object({ ref: z.string() }),
});
export type GhPull = z.infer<typeof GhPull>;

export const GhCheckRun = z.object({
  id: z.number().int(),
  name: z.string(),
  head_sha: z.string(),
  status: z.string(),
  conclusion: z.string().nullable(),
  details_url: z.string().nullable().optional(),
  started_at: z.string().nullable().optional(),
  completed_at: z.string().nullable().optional(),
  pull_requests: z.array(z.object({ number: z.number().int() })).optional(),
});
export type GhCheckRun = z.infer<typeof GhCheckRun>;

export const GhCommitStatus = z.object({
  id: z.number().int(),
  context: z.string(),
  state: z.string(),
  target_url: z.string().nullable().optional(),
});
export type GhCommitStatus = z.infer<typeof GhCommitStatus>;

// Webhook payloads: only what the handlers use; everything else is ignored.
const RepositoryRef = z.object({ id: z.number().int().positive() });

export const InstallationEventPayload = z.object({ action: z.string(), installation: GhInstallation });
export const InstallationRepositoriesPayload = z.object({
  action: z.string(),
  installation: GhInstallation,
  repositories_added: z.array(RepositoryRef).default([]),
  repositories_removed: z.array(RepositoryRef).default([]),
});
export const RepositoryEventPayload = z.object({ action: z.string(), repository: GhRepository });
export const PullRequestEventPayload = z.object({
  action: z.string(),
  pull_request: GhPull,
  repository: RepositoryRef,
});
export const CheckRunEventPayload = z.object({ action: z.string(), check_run: GhCheckRun, repository: RepositoryRef });
export const CheckSuiteEventPayload = z.object({
  action: z.string(),
  check_suite: z.object({
    head_sha: z.string(),
    pull_requests: z.array(z.object({ number: z.number().int() })).optional(),
  }),
  repository: RepositoryRef,
});
export const StatusEventPayload = z.object({ sha: z.string(), repository: RepositoryRef });
