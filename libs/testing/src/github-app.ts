import { generateAppKeyPair, startFakeGitHub, type FakeGitHub } from './fake-github.js';

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
