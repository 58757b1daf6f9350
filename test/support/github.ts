import { pkcePair, startGitHubApp, type FakeGitHub, type GitHubAppOptions } from '@threadwork/testing';
import { expect } from 'vitest';
import { startStack, type Stack, type TestUser } from './stack.js';

export interface GitHubStack {
  stack: Stack;
  fake: FakeGitHub;
  /** The app's `return_to` for install sessions. */
  returnTo: string;
  stop(): Promise<void>;
}

/**
 * Every service of the API (`startStack`) acting as a GitHub App against a fake GitHub, which
 * sends its setup redirects and webhooks to the gateway. `env`: more of the services' environment.
 */
export async function startGitHubStack(app: GitHubAppOptions, env: Record<string, string> = {}): Promise<GitHubStack> {
  const { fake, env: appEnv, returnTo } = await startGitHubApp(app);
  let stack: Stack;
  try {
    stack = await startStack({ ...appEnv, ...env });
  } catch (err) {
    await fake.close();
    throw err;
  }
  fake.setupUrl = `${stack.baseUrl}/v1/repohost/setup`;
  fake.webhookUrl = `${stack.baseUrl}/v1/repohost/webhooks`;
  return {
    stack,
    fake,
    returnTo,
    async stop() {
      await stack.stop();
      // Last: closing the fake is where a test file that strayed from GitHub's API fails.
      await fake.close();
    },
  };
}

/** An install session of `user`'s: the install URL, its state, and the PKCE verifier only `user`'s client holds. */
export async function startInstallSession(
  gh: GitHubStack,
  user: TestUser,
): Promise<{ installUrl: string; state: string; verifier: string }> {
  const { verifier, challenge } = pkcePair();
  const res = await gh.stack.fetch('/v1/repohost/install-session', {
    method: 'POST',
    user,
    body: JSON.stringify({ return_to: gh.returnTo, code_challenge: challenge }),
  });
  expect(res.status).toBe(201);
  const { install_url } = (await res.json()) as { install_url: string };
  return { installUrl: install_url, state: new URL(install_url).searchParams.get('state')!, verifier };
}

/**
 * A browser signed in to GitHub as `login` opens `installUrl`, installs the app on `target` (an
 * organisation it administers, or its own account), and follows GitHub back through the gateway's
 * setup callback: the setup URL it went through, and what reaches the app at `return_to`.
 */
export async function installInBrowser(
  gh: GitHubStack,
  login: string,
  installUrl: string,
  target = login,
): Promise<{ setupUrl: string; returned: Record<string, string> }> {
  const page = await fetch(installUrl, {
    headers: { 'x-fake-login': login, 'x-fake-target': target },
    redirect: 'manual',
  });
  expect(page.status).toBe(302);
  const setupUrl = page.headers.get('location')!;
  expect(setupUrl.startsWith(`${gh.stack.baseUrl}/v1/repohost/setup?`)).toBe(true);
  const callback = await fetch(setupUrl, { redirect: 'manual' });
  expect(callback.status).toBe(302);
  const returned = new URL(callback.headers.get('location')!);
  expect(`${returned.protocol}//${returned.host}${returned.pathname}`).toBe(gh.returnTo);
  return { setupUrl, returned: Object.fromEntries(returned.searchParams) };
}

/** The app redeems the one-time code it was handed, with the verifier of its session. */
export const redeemInstallation = (gh: GitHubStack, user: TestUser, code: string, verifier: string) =>
  gh.stack.fetch('/v1/repohost/installations', {
    method: 'POST',
    user,
    body: JSON.stringify({ code, code_verifier: verifier }),
  });

/**
 * Links the installation `login` makes on `target` to `user`, the legitimate way: the install
 * session, GitHub's page, the setup callback, and the app redeeming the code with its verifier.
 * Returns the installation's id.
 */
export async function linkInstallation(
  gh: GitHubStack,
  user: TestUser,
  login: string,
  target = login,
): Promise<number> {
  const session = await startInstallSession(gh, user);
  const { returned } = await installInBrowser(gh, login, session.installUrl, target);
  expect(returned.outcome).toBe('installed');
  expect((await redeemInstallation(gh, user, returned.code!, session.verifier)).status).toBe(201);
  return Number(returned.installation_id);
}
