import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGitHubStack, type GitHubStack } from '../support/github.js';
import { chromiumMissing, launchChromium, watchErrors, type Browser } from './browser.js';

// Sign in with GitHub as a user meets it: the signed-out page of the console served by a real
// stack acting as a GitHub App with an OAuth client, the fake GitHub's authorize page (which signs
// the browser in as the user its `x-fake-login` header names), and back, signed in.

const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist', import.meta.url));
const RESULTS = fileURLToPath(new URL('../../.test-results/console', import.meta.url));

/** A port nothing listens on now, for the gateway, so its public URL is known before it starts. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe.skipIf(chromiumMissing)('sign in with GitHub in Chromium', () => {
  let gh: GitHubStack;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    mkdirSync(RESULTS, { recursive: true });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    gh = await startGitHubStack(
      {
        appId: 5151,
        slug: 'threadwork-console-signin',
        webhookSecret: 'console-signin-webhook-secret',
        scheme: 'twconsole',
        oauth: { clientId: 'Iv1.console-signin', clientSecret: 'console-signin-client-secret' },
      },
      {
        PORT: String(port),
        PUBLIC_BASE_URL: base,
        CONSOLE_DIR: CONSOLE_DIST,
        SESSION_SECRET: 'a-console-signin-session-secret-of-32-characters',
        GITHUB_SIGN_IN_ALLOW: '*',
      },
    );
    gh.fake.callbackUrl = `${base}/v1/auth/github/callback`;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await gh?.stop();
  });

  it('offers the button on the signed-out page, and comes back from GitHub signed in', async () => {
    const login = uniqueId('octo');
    gh.fake.account(login);
    // Who the browser is at the fake GitHub (the gateway ignores the header).
    await browser.context.setExtraHTTPHeaders({ 'x-fake-login': login });
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      await page.goto(`${base}/`);
      const button = page.getByRole('link', { name: 'Sign in with GitHub' });
      await button.waitFor();
      await page.screenshot({ path: `${RESULTS}/signed-out-github.png`, fullPage: true });
      await button.focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(`${base}/`);
      await page
        .getByTestId('user')
        .filter({ hasText: `github:${login}` })
        .waitFor();
      // Only the signed-out page's own probe of the session was refused, before signing in.
      expect(
        errors.unexpected(
          (message) =>
            /status of 401/.test(message.text()) && new URL(message.location().url).pathname === '/v1/session',
        ),
      ).toEqual([]);
    } finally {
      await page.close();
      await browser.context.clearCookies();
    }
  });
});
