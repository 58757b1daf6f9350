import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MAX_ACTIVE_API_KEYS_PER_USER } from '@threadwork/contracts';
import { SESSION_COOKIE, signSession } from '@threadwork/gateway';
import type { ConsoleMessage, Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type Stack, type TestUser } from '../support/stack.js';
import { chromiumMissing, launchChromium, watchErrors, type Browser } from './browser.js';

// The console's settings and sign-out as a user meets them: the gateway of a real stack serving
// the built console, a real headless Chromium signed in with the cookie the admin CLI would print,
// and the keys the page makes used from here as any other program would use them.

const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist', import.meta.url));
const RESULTS = fileURLToPath(new URL('../../.test-results/console', import.meta.url));
const SESSION_SECRET = 'a-settings-test-session-secret-of-32-characters-or-more';
const KEY_NAME = 'deploy script';

if (chromiumMissing) process.stderr.write(`test/console: skipped, ${chromiumMissing}\n`);

describe.skipIf(chromiumMissing)('console settings in Chromium', () => {
  let stack: Stack;
  let browser: Browser;

  beforeAll(async () => {
    if (!existsSync(`${CONSOLE_DIST}/index.html`)) {
      throw new Error(`no built console in ${CONSOLE_DIST}: run \`npm run build\` first`);
    }
    mkdirSync(RESULTS, { recursive: true });
    stack = await startStack({ SESSION_SECRET, CONSOLE_DIR: CONSOLE_DIST });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  /** Signs `user` in to the browser as `npm run admin -- sessions create` would; the cookie's value. */
  async function signIn(user: TestUser): Promise<string> {
    const value = signSession(user.id, Math.floor(Date.now() / 1000) + 3600, SESSION_SECRET);
    await browser.context.addCookies([
      { name: SESSION_COOKIE, value, url: stack.baseUrl, httpOnly: true, sameSite: 'Lax' },
    ]);
    return value;
  }

  it('makes an API key that works, revokes it so it no longer does, and signs out, all from the keyboard', async () => {
    const alice = await stack.createUser('alice');
    const cookie = await signIn(alice);
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    const writes = watchWrites(page);
    try {
      await page.goto(`${stack.baseUrl}/`);
      await page.getByRole('heading', { name: 'Work', level: 1 }).waitFor();
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Settings' }).focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(`${stack.baseUrl}/settings/keys`);
      await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();

      // Create: type a name, Enter submits; the key is shown once, focused, in a read-only field.
      await page.getByLabel('Name', { exact: true }).focus();
      await page.keyboard.type(KEY_NAME);
      await page.keyboard.press('Enter');
      const field = page.getByLabel('Your new API key');
      await field.waitFor();
      expect(await page.getByText('it will not be shown again').count()).toBe(1);
      expect(await field.getAttribute('readonly')).not.toBeNull();
      expect(await activeElementId(page)).toBe('new-key-value');
      const key = await field.inputValue();
      expect(key).toMatch(/^twk_[0-9A-Za-z]{40}$/);

      // Copy: the clipboard holds the key afterwards.
      await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.baseUrl });
      await page.keyboard.press('Tab');
      expect(await activeElementText(page)).toBe('Copy');
      await page.keyboard.press('Enter');
      await page.getByText('Copied to the clipboard.').waitFor();
      expect(await page.evaluate<string>('navigator.clipboard.readText()')).toBe(key);

      // The list shows the key by its prefix, never the key itself.
      const active = page.getByRole('list', { name: 'Active keys' });
      const row = active.locator(`[data-prefix="${key.slice(0, 12)}"]`);
      await row.waitFor();
      expect(await row.innerText()).toContain(KEY_NAME);
      expect(await row.innerText()).toMatch(/Last used\s+never/);
      expect(await page.locator('main').innerText()).not.toContain(key.slice(12));
      await page.getByRole('button', { name: 'Done' }).focus();
      await page.keyboard.press('Enter');
      expect(await field.count()).toBe(0);
      expect(await activeElementId(page)).toBe('key-name');

      // The key works as any program would use it.
      const bearer = { authorization: `Bearer ${key}` };
      expect((await fetch(`${stack.baseUrl}/v1/work`, { headers: bearer })).status).toBe(200);

      // Revoke: asking puts focus on Cancel; the destructive choice is one deliberate step away.
      await row.getByRole('button', { name: `Revoke key ${KEY_NAME}` }).focus();
      await page.keyboard.press('Enter');
      const confirm = row.getByRole('group', { name: `Revoke key ${KEY_NAME}?` });
      await confirm.waitFor();
      expect(await activeElementText(page)).toBe('Cancel');
      await page.keyboard.press('Enter');
      expect(await confirm.count()).toBe(0);
      expect(await activeElementText(page)).toBe('Revoke');
      await page.keyboard.press('Enter');
      await confirm.waitFor();
      await page.keyboard.press('Shift+Tab');
      expect(await activeElementText(page)).toBe('Yes, revoke');
      await page.keyboard.press('Enter');
      await page
        .getByRole('status')
        .filter({ hasText: `Key “${KEY_NAME}” (${key.slice(0, 12)}…) revoked.` })
        .waitFor();
      const revoked = page.getByRole('list', { name: 'Revoked keys' }).locator(`[data-prefix="${key.slice(0, 12)}"]`);
      await revoked.waitFor();
      expect(await revoked.innerText()).toMatch(/Revoked\s+\S/);
      expect(await row.count()).toBe(0);
      expect(await revoked.getByRole('button').count()).toBe(0);

      expect((await fetch(`${stack.baseUrl}/v1/work`, { headers: bearer })).status).toBe(401);
      expect(await fitsWidth(page)).toBe(true);
      await page.screenshot({ path: `${RESULTS}/settings-keys.png`, fullPage: true });

      // Sign out from the header: the signed-out page, and the session is over for the gateway.
      await page.getByRole('button', { name: 'Sign out' }).focus();
      await page.keyboard.press('Enter');
      await page.getByRole('heading', { name: 'Sign in to Threadwork' }).waitFor();
      expect(new URL(page.url()).pathname).toBe('/');
      expect(await page.getByTestId('user').count()).toBe(0);
      expect((await browser.context.cookies(stack.baseUrl)).map((c) => c.name)).not.toContain(SESSION_COOKIE);
      const session = await fetch(`${stack.baseUrl}/v1/session`, {
        headers: { cookie: `${SESSION_COOKIE}=${cookie}` },
      });
      expect(session.status).toBe(401);

      // Every write went out as the gateway's CSRF guard wants it: from the API's own origin.
      expect(writes.map((write) => write.what).sort()).toEqual([
        'DELETE /v1/keys/{id}',
        'POST /v1/auth/logout',
        'POST /v1/keys',
      ]);
      for (const write of writes) expect(await write.site, write.what).toBe('same-origin');
      expect(errors.unexpected()).toEqual([]);
    } finally {
      await page.close();
      await browser.context.clearCookies();
      await browser.context.clearPermissions();
    }
  });

  it('says what the gateway said when no more keys may be made', async () => {
    const carol = await stack.createUser('carol');
    const cookie = await signIn(carol);
    // Up to the cap from here, as the same signed-in browser would (no Sec-Fetch-Site: not a browser).
    const create = () =>
      stack.fetch('/v1/keys', {
        method: 'POST',
        headers: { cookie: `${SESSION_COOKIE}=${cookie}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'filler' }),
      });
    let made = 0;
    for (let res = await create(); res.status !== 409; res = await create()) {
      expect(res.status).toBe(201);
      made += 1;
      expect(made).toBeLessThanOrEqual(MAX_ACTIVE_API_KEYS_PER_USER);
    }
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      await page.goto(`${stack.baseUrl}/settings/keys`);
      await page.getByRole('list', { name: 'Active keys' }).getByTestId('api-key').first().waitFor();
      await page.getByLabel('Name', { exact: true }).fill('one too many');
      await page.getByRole('button', { name: 'Create key' }).click();
      const alert = page.getByRole('alert');
      await alert.waitFor();
      expect(await alert.innerText()).toBe(
        `No key was made: at most ${MAX_ACTIVE_API_KEYS_PER_USER} API keys may be active at once; revoke one you no longer use first`,
      );
      expect(await page.getByLabel('Your new API key').count()).toBe(0);
      expect(errors.unexpected(isRefused('/v1/keys', 409))).toEqual([]);
    } finally {
      await page.close();
      await browser.context.clearCookies();
    }
  });

  it('shows the GitHub connection, the setup outcome it came back with, and why it cannot install', async () => {
    const bob = await stack.createUser('bob');
    await signIn(bob);
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      await page.goto(`${stack.baseUrl}/settings/github?outcome=error&error=invalid_state&installation_id=42`);
      const notice = page.getByRole('alert').filter({ hasText: 'not linked' });
      await notice.waitFor();
      expect(await notice.innerText()).toBe(
        'The GitHub App was not linked (installation 42): the installation link had expired or was already used; start again.',
      );
      // Shown once, then out of the address.
      await page.waitForURL(`${stack.baseUrl}/settings/github`);

      // The stack serves its local folder of repositories, and no GitHub App.
      await page.getByTestId('installation').first().waitFor();
      expect(await page.getByTestId('connection-status').innerText()).toBe('Connected');
      expect(await page.locator('main').innerText()).toContain('no GitHub App configured');

      await page.getByRole('button', { name: 'Install the GitHub App' }).focus();
      await page.keyboard.press('Enter');
      const refused = page.getByRole('alert').filter({ hasText: 'cannot be installed' });
      await refused.waitFor();
      expect(await refused.innerText()).toBe('GitHub cannot be installed from here: no GitHub App is configured');
      expect(new URL(page.url()).pathname).toBe('/settings/github');
      expect(await fitsWidth(page)).toBe(true);
      await page.screenshot({ path: `${RESULTS}/settings-github.png`, fullPage: true });

      // A crafted link's text is never shown as the console's own: an error code repohost does not
      // send (nor one that names a property of every object), an outcome it does not send, a
      // non-numeric installation id all give the one fixed message.
      const generic =
        'GitHub came back with an answer this console does not know; nothing was linked. Start again with “Install the GitHub App” here.';
      for (const query of [
        'outcome=error&error=Call+0800+123+456+to+restore+your+account&installation_id=42',
        'outcome=error&error=constructor',
        'outcome=Your+account+is+locked.+Call+0800+123+456',
        'outcome=error&error=invalid_state&installation_id=42+%E2%80%94+call+0800+123+456',
      ]) {
        await page.goto(`${stack.baseUrl}/settings/github?${query}`);
        const shown = page.getByRole('alert').filter({ hasText: /does not know|not linked/ });
        await shown.waitFor();
        const text = await shown.innerText();
        expect(text).not.toContain('0800');
        expect(text).not.toContain('constructor');
        if (!query.includes('invalid_state')) expect(text).toBe(generic);
        else
          expect(text).toBe(
            'The GitHub App was not linked: the installation link had expired or was already used; start again.',
          );
        await page.waitForURL(`${stack.baseUrl}/settings/github`);
        expect(await page.locator('main').innerText()).not.toContain('0800');
      }

      await page.goto(`${stack.baseUrl}/settings/github?outcome=requested`);
      await page.getByRole('status').filter({ hasText: 'Installation requested' }).waitFor();
      await page.waitForURL(`${stack.baseUrl}/settings/github`);

      // An installation's one-time code: this tab holds no verifier, so nothing is sent.
      await page.goto(`${stack.baseUrl}/settings/github?outcome=installed&installation_id=42&code=one-time-code`);
      await page.getByRole('alert').filter({ hasText: 'this browser tab did not start the installation' }).waitFor();
      await page.waitForURL(`${stack.baseUrl}/settings/github`);

      // With the verifier of an installation this tab started, the code is redeemed with it; this
      // stack has no GitHub App, and the page says the gateway's reason.
      await page.evaluate(`sessionStorage.setItem('threadwork.repohost.code_verifier', '${'v'.repeat(43)}')`);
      const redeemed = page.waitForRequest((request) => request.url().endsWith('/v1/repohost/installations'));
      await page.goto(`${stack.baseUrl}/settings/github?outcome=installed&installation_id=42&code=one-time-code`);
      expect((await redeemed).postDataJSON()).toEqual({ code: 'one-time-code', code_verifier: 'v'.repeat(43) });
      const notLinked = page.getByRole('alert').filter({ hasText: 'Not linked' });
      await notLinked.waitFor();
      expect(await notLinked.innerText()).toBe('Not linked: no GitHub App is configured');
      await page.waitForURL(`${stack.baseUrl}/settings/github`);
      expect(
        errors.unexpected(
          (message) =>
            isRefused('/v1/repohost/install-session', 400)(message) ||
            isRefused('/v1/repohost/installations', 400)(message),
        ),
      ).toEqual([]);
    } finally {
      await page.close();
      await browser.context.clearCookies();
    }
  });
});

interface Write {
  what: string;
  /** The Sec-Fetch-Site the browser sent. */
  site: Promise<string | undefined>;
}

/** The API writes a page sends, with the Sec-Fetch-Site header the browser gave each. */
function watchWrites(page: Page): Write[] {
  const writes: Write[] = [];
  page.on('request', (request: Request) => {
    const url = new URL(request.url());
    if (request.method() === 'GET' || !url.pathname.startsWith('/v1/')) return;
    writes.push({
      what: `${request.method()} ${url.pathname.replace(/^\/v1\/keys\/[^/]+$/, '/v1/keys/{id}')}`,
      site: request.allHeaders().then((headers) => headers['sec-fetch-site']),
    });
  });
  return writes;
}

/** Chromium logs every refused request as an error: this one is the answer the test asked for. */
function isRefused(path: string, status: number) {
  return (message: ConsoleMessage) =>
    message.text().includes(`status of ${status}`) && new URL(message.location().url).pathname === path;
}

function activeElementId(page: Page): Promise<string> {
  return page.evaluate<string>('document.activeElement?.id ?? ""');
}

function activeElementText(page: Page): Promise<string> {
  return page.evaluate<string>('document.activeElement?.textContent ?? ""');
}

/** No sideways scrolling on a 360 px wide screen. */
function fitsWidth(page: Page): Promise<boolean> {
  return page.evaluate<boolean>('document.documentElement.scrollWidth <= window.innerWidth');
}
