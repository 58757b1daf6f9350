import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ThreadWithRun } from '@threadwork/contracts';
import { SESSION_COOKIE, signSession } from '@threadwork/gateway';
import type { ConsoleMessage, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json } from '../support/http.js';
import { startStack, type Stack, type TestUser } from '../support/stack.js';
import { chromiumMissing, launchChromium, watchErrors, type Browser } from './browser.js';
import { measurePageWeight, PAGE_WEIGHT_BUDGET_BYTES } from './page-weight.js';

// The web console as a user meets it: the gateway of a real stack serving the built console,
// opened in a real headless Chromium, signed in with the cookie the admin CLI would print.

const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist', import.meta.url));
const RESULTS = fileURLToPath(new URL('../../.test-results/console', import.meta.url));
const SESSION_SECRET = 'a-console-test-session-secret-of-32-characters-or-more';
const PROMPT = 'Write the changelog for the console release';

if (chromiumMissing) process.stderr.write(`test/console: skipped, ${chromiumMissing}\n`);

describe.skipIf(chromiumMissing)('the web console in Chromium', () => {
  let stack: Stack;
  let alice: TestUser;
  let browser: Browser;
  let threadId: string;

  beforeAll(async () => {
    if (!existsSync(`${CONSOLE_DIST}/index.html`)) {
      throw new Error(`no built console in ${CONSOLE_DIST}: run \`npm run build\` first`);
    }
    mkdirSync(RESULTS, { recursive: true });
    stack = await startStack({ SESSION_SECRET, CONSOLE_DIR: CONSOLE_DIST });
    alice = await stack.createUser('alice');
    const repositoryId = await stack.addRepo('widgets', { branch: 'trunk' });
    const created = await json(
      await stack.fetch('/v1/threads', {
        method: 'POST',
        user: alice,
        body: JSON.stringify({ repository_id: repositoryId, prompt: PROMPT }),
      }),
      202,
      ThreadWithRun,
    );
    threadId = created.id;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
  });

  it('lists the signed-in user’s threads on the Work page, each link usable from the keyboard', async () => {
    const expires = Math.floor(Date.now() / 1000) + 3600;
    await browser.context.addCookies([
      {
        name: SESSION_COOKIE,
        value: signSession(alice.id, expires, SESSION_SECRET),
        url: stack.baseUrl,
        httpOnly: true,
        sameSite: 'Lax',
      },
    ]);
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      await page.goto(`${stack.baseUrl}/`);
      const row = page.getByTestId('thread').filter({ hasText: PROMPT });
      await row.waitFor();
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Work');
      expect(await page.getByTestId('user').textContent()).toMatch(/^Signed in/);
      const facts = await row.locator('dl').innerText();
      expect(facts).toMatch(/Status\s+active/);
      expect(facts).toMatch(/Latest run\s+queued/);
      expect(await row.locator('time').getAttribute('datetime')).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(await fitsWidth(page)).toBe(true);
      await page.screenshot({ path: `${RESULTS}/work.png`, fullPage: true });

      const link = row.getByRole('link', { name: PROMPT });
      await link.focus();
      await page.keyboard.press('Enter');
      await page.waitForURL(`${stack.baseUrl}/threads/${threadId}`);
      await page.getByText('trunk').waitFor();
      await page.screenshot({ path: `${RESULTS}/thread-opened.png`, fullPage: true });

      // A deep link loads the console itself (the gateway falls back to index.html).
      await page.reload();
      await page.getByText('trunk').waitFor();
      expect(errors.unexpected()).toEqual([]);
    } finally {
      await page.close();
      await browser.context.clearCookies();
    }
  });

  it('tells a visitor without a session how to sign in', async () => {
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      const providers = page.waitForResponse((res) => new URL(res.url()).pathname === '/v1/auth/providers');
      await page.goto(`${stack.baseUrl}/`);
      await page.getByRole('heading', { name: 'Sign in to Threadwork' }).waitFor();
      // No GitHub App here: the page asked, and offers no GitHub button.
      expect(await (await providers).json()).toEqual({ github: false });
      expect(await page.getByRole('link', { name: 'Sign in with GitHub' }).count()).toBe(0);
      const text = await page.locator('main').innerText();
      expect(text).toContain('npm start');
      expect(text).toContain('npm run admin -- login-link --user <you>');
      expect(await page.getByTestId('user').count()).toBe(0);
      expect(await fitsWidth(page)).toBe(true);
      await page.screenshot({ path: `${RESULTS}/signed-out.png`, fullPage: true });
      // Chromium logs every refused request as an error; the sign-in probe's own 401 is the
      // answer the page asked for. Anything else is a fault.
      expect(errors.unexpected(isSignInProbe401)).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('serves the console with a strict policy, hashed assets cached for good and the API’s 404 kept', async () => {
    const index = await stack.fetch('/');
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toMatch(/^text\/html/);
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const csp = index.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(index.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await index.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);

    const asset = html.match(/src="(\/assets\/[^"]+\.js)"/)?.[1];
    expect(asset).toBeDefined();
    const script = await stack.fetch(asset!);
    expect(script.status).toBe(200);
    expect(script.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(script.headers.get('x-content-type-options')).toBe('nosniff');

    const deep = await stack.fetch('/threads/thr_anything');
    expect(deep.status).toBe(200);
    expect(await deep.text()).toBe(html);
    expect(deep.headers.get('cache-control')).toBe('no-cache');
    expect(await json(await stack.fetch('/v1/no-such-route', { user: alice }), 404)).toMatchObject({
      error: { code: 'not_found' },
    });
    expect((await stack.fetch('/assets/missing-0000.js')).status).toBe(404);
    expect((await stack.fetch('/v1/work')).status).toBe(401);
  });
});

// Measured on the build itself, with or without a browser.
describe('the console’s first load', () => {
  it(`keeps the first load within ${PAGE_WEIGHT_BUDGET_BYTES / 1024} KiB of gzipped JS and CSS`, () => {
    const weight = measurePageWeight(CONSOLE_DIST);
    mkdirSync(RESULTS, { recursive: true });
    writeFileSync(`${RESULTS}/page-weight.json`, `${JSON.stringify(weight, null, 2)}\n`);
    expect(weight.files.some((file) => file.path.endsWith('.js'))).toBe(true);
    expect(weight.files.some((file) => file.path.endsWith('.css'))).toBe(true);
    expect(weight.gzipBytes, JSON.stringify(weight.files)).toBeLessThanOrEqual(PAGE_WEIGHT_BUDGET_BYTES);
  });
});

/** No sideways scrolling on a 360 px wide screen. */
function fitsWidth(page: Page): Promise<boolean> {
  // A string: this file is compiled without the DOM's types, and the expression runs in the page.
  return page.evaluate<boolean>('document.documentElement.scrollWidth <= window.innerWidth');
}

function isSignInProbe401(message: ConsoleMessage): boolean {
  if (!/status of 401/.test(message.text())) return false;
  const path = new URL(message.location().url).pathname;
  return path === '/v1/work' || path === '/v1/session';
}
