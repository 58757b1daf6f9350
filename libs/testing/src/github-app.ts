import { rpc } from '@threadwork/contracts';
import { request, type NatsConnection } from '@threadwork/platform';
import {
  generateAppKeyPair,
  pushBranch,
  startFakeGitHub,
  type FakeGitHub,
  type FakeRepository,
} from './fake-github/index.js';

export interface GitHubAppOptions {
  appId: number;
  slug: string;
  webhookSecret: string;
  /** The app's URL scheme: install sessions may return only to `<scheme>://repohost/setup`. */
  scheme: string;
  /** The app's OAuth client; without it the setup redirect carries no OAuth code. */
  oauth?: { clientId: string; clientSecret: string };
}

export interface GitHubApp {
  fake: FakeGitHub;
  /** What repohost (and the gateway, for the webhook secret) read to act as the app against `fake`. */
  env: Record<string, string>;
  /** The app's `return_to` for install sessions. */
  returnTo: string;
}

/**
 * A fake GitHub with a GitHub App registered on it (a fresh key pair, its webhook secret, its
 * OAuth client), and the services' environment that makes them that app.
 */
export async function startGitHubApp(options: GitHubAppOptions): Promise<GitHubApp> {
  const keys = generateAppKeyPair();
  const fake = await startFakeGitHub({
    appId: options.appId,
    slug: options.slug,
    publicKey: keys.publicKey,
    webhookSecret: options.webhookSecret,
    ...(options.oauth ? { oauth: options.oauth } : {}),
  });
  return {
    fake,
    env: {
      GITHUB_APP_ID: String(options.appId),
      GITHUB_APP_PRIVATE_KEY: keys.privateKey,
      GITHUB_WEBHOOK_SECRET: options.webhookSecret,
      GITHUB_APP_SLUG: options.slug,
      ...(options.oauth
        ? { GITHUB_CLIENT_ID: options.oauth.clientId, GITHUB_CLIENT_SECRET: options.oauth.clientSecret }
        : {}),
      GITHUB_API_URL: fake.apiUrl,
      GITHUB_WEB_URL: fake.webUrl,
      APP_SCHEME: options.scheme,
    },
    returnTo: `${options.scheme}://repohost/setup`,
  };
}

/**
 * The runner's part at the end of a run: a token for `repository` from repohost, asked as the
 * holder of the run (`claim_id`) over `nc`, then `files` committed on `branch` from the
 * repository's default branch and pushed with real git. Returns the base and the new commit.
 */
export async function pushAsRunner(
  nc: NatsConnection,
  fake: FakeGitHub,
  input: {
    run_id: string;
    claim_id: string;
    repository: FakeRepository;
    branch: string;
    files: Record<string, string>;
  },
): Promise<{ baseRevision: string; revision: string }> {
  const { token } = await request(nc, rpc.repohost.token, {
    run_id: input.run_id,
    claim_id: input.claim_id,
    repository_ids: [input.repository.id],
  });
  if (!token) throw new Error(`repohost gave no token for ${input.repository.full_name}`);
  return pushBranch({
    cloneUrl: fake.cloneUrl(input.repository.full_name),
    token,
    base: input.repository.default_branch,
    branch: input.branch,
    files: input.files,
  });
}
