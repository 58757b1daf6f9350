import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createBareRepo, waitFor } from '@threadwork/testing';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProcessStack, type ProcessStack } from '../support/process-stack.js';
import { chromiumMissing, launchChromium, watchErrors, type Browser, type PageErrors } from './browser.js';

// The console end to end, the way the README's demo walkthrough tells a newcomer to use it:
// `THREADWORK_DEMO=1 npm start`, the printed login link, a plan-mode thread made in the New thread
// page, its question answered, the run followed to its end, its diff reviewed, an API key made,
// used and revoked in Settings; then a second user, who sees none of it. One screenshot per page.

const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist', import.meta.url));
const RESULTS = fileURLToPath(new URL('../../.test-results/console', import.meta.url));
const PROMPT = 'Greet the people who read this repository';
const KEY_NAME = 'walkthrough';

if (chromiumMissing) process.stderr.write(`test/console: skipped, ${chromiumMissing}\n`);

describe.skipIf(chromiumMissing)('a walk through the console on the demo stack', () => {
  let stack: ProcessStack;
  let browser: Browser;
  let base: string;
  /** The first user's thread, for the second to guess. */
  let threadPath = '';

  beforeAll(async () => {
    if (!existsSync(`${CONSOLE_DIST}/index.html`)) {
      throw new Error(`no built console in ${CONSOLE_DIST}: run \`npm run build\` first`);
    }
    mkdirSync(RESULTS, { recursive: true });
    stack = await startProcessStack({ THREADWORK_DEMO: '1' });
    base = `http://127.0.0.1:${stack.port}`;
    createBareRepo(join(stack.dataDir, 'repos'), 'greetings');
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await stack?.stop();
    stack?.cleanUp();
  });

  /** Opens a login link (the printed one, or the admin CLI's) in `page`, as its user would. */
  async function signInByLink(page: Page, link: string, login: string): Promise<void> {
    const url = new URL(link);
    await page.goto(`${base}${url.pathname}${url.search}`);
    await page
      .getByTestId('user')
      .filter({ hasText: `Signed in as ${login}` })
      .waitFor();
  }

  const shot = (page: Page, name: string) =>
    page.screenshot({ path: `${RESULTS}/walkthrough-${name}.png`, fullPage: true });
  const nav = (page: Page, name: string) =>
    page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name }).click();
  const noErrors = (errors: PageErrors) => expect(errors.unexpected()).toEqual([]);

  it(
    'signs in by the printed link, runs a plan-mode thread to its review, and makes, uses and revokes an API key',
    { timeout: 240_000 },
    async () => {
      const page = await browser.context.newPage();
      const errors = watchErrors(page);
      try {
        const printed = await waitFor(
          'the login link',
          () => /(http:\/\/\S+\/v1\/auth\/link\?code=\S+)/.exec(stack.output())?.[1],
        );
        await signInByLink(page, printed, 'local');
        await page.getByRole('heading', { name: 'Work', level: 1 }).waitFor();
        await shot(page, '1-work');

        // New thread: the repository found by search, plan mode, a prompt.
        await nav(page, 'New thread');
        await page.waitForURL(`${base}/new`);
        await page.getByLabel('Search repositories').fill('greet');
        const list = page.getByRole('listbox', { name: /^Repository/ });
        await waitFor('the search to find the repository', async () =>
          (await list.locator('option').allTextContents()).some((name) => name.endsWith('greetings')),
        );
        await page.getByLabel('Search repositories').press('ArrowDown');
        await page.getByTestId('chosen-repository').filter({ hasText: 'greetings' }).waitFor();
        await page.getByLabel('Collaboration mode').selectOption('plan');
        await page.getByLabel('Prompt').fill(PROMPT);
        await shot(page, '2-new-thread');
        await page.getByRole('button', { name: 'Create thread' }).click();
        await page.waitForURL(/\/threads\/[^/]+$/);
        threadPath = new URL(page.url()).pathname;

        // The agent asks which file to change; the answer is given in the page.
        const question = page.getByTestId('interaction');
        await question.getByRole('group', { name: /Which file should I change\?/ }).waitFor({ timeout: 90_000 });
        await shot(page, '3-question');
        await question.getByRole('radio', { name: /^README\.md/ }).check();
        await question.getByRole('button', { name: 'Send answer' }).click();
        await question.waitFor({ state: 'detached' });

        // The run goes on live to its end: the demo file is written, the reply arrives.
        await page
          .getByTestId('run-status')
          .filter({ hasText: /^completed$/ })
          .waitFor({ timeout: 120_000 });
        const demoFile = page
          .getByTestId('run-log')
          .locator('li.file')
          .filter({ hasText: /threadwork-demo-run_\w+\.md/ });
        await demoFile.waitFor();
        const fileName = /threadwork-demo-run_\w+\.md/.exec(await demoFile.innerText())![0];
        await shot(page, '4-thread');
        // The README's screenshot (console/screenshot.png) is this page on a desktop-sized window.
        await page.setViewportSize({ width: 1200, height: 1000 });
        await page.evaluate('window.scrollTo(0, 0)');
        await page.screenshot({ path: `${RESULTS}/console.png` });
        await page.setViewportSize({ width: 360, height: 800 });

        // Review: the candidate's diff holds the demo file and the line appended to the README.
        await page.getByRole('link', { name: 'Review the changes' }).click();
        await page.waitForURL(`${base}${threadPath}/review`);
        const files = page.getByTestId('diff-file');
        await files.first().waitFor();
        expect((await files.locator('summary .diff-path').allTextContents()).sort()).toEqual(
          ['README.md', fileName].sort(),
        );
        const added = files.filter({ has: page.locator('summary', { hasText: fileName }) }).locator('tr.diff-add');
        expect(await added.count()).toBeGreaterThan(0);
        await shot(page, '5-review');

        // Back on Work: the thread with its status and the lines its candidate changed.
        await nav(page, 'Work');
        const row = page.getByTestId('thread').filter({ hasText: PROMPT });
        await row.waitFor();
        const changes = await row.getByTestId('thread-changes').innerText();
        expect(changes).toMatch(/^\+\d+ −\d+$/);
        expect(Number(/\+(\d+)/.exec(changes)![1])).toBeGreaterThan(0);

        // Settings: a key made here works from any program until it is revoked here.
        await nav(page, 'Settings');
        await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
        await page.getByLabel('Name', { exact: true }).fill(KEY_NAME);
        await page.getByLabel('Name', { exact: true }).press('Enter');
        const key = await page.getByLabel('Your new API key').inputValue();
        const bearer = { authorization: `Bearer ${key}` };
        const work = await fetch(`${base}/v1/work`, { headers: bearer });
        expect(work.status).toBe(200);
        expect(JSON.stringify(await work.json())).toContain(threadPath.split('/')[2]);
        await shot(page, '6-settings-key');
        await page.getByRole('button', { name: 'Done' }).click();
        const keyRow = page.getByRole('list', { name: 'Active keys' }).locator(`[data-prefix="${key.slice(0, 12)}"]`);
        await keyRow.getByRole('button', { name: `Revoke key ${KEY_NAME}` }).click();
        await keyRow.getByRole('button', { name: 'Yes, revoke' }).click();
        await page
          .getByRole('list', { name: 'Revoked keys' })
          .locator(`[data-prefix="${key.slice(0, 12)}"]`)
          .waitFor();
        expect((await fetch(`${base}/v1/work`, { headers: bearer })).status).toBe(401);

        await page.getByRole('button', { name: 'Sign out' }).click();
        await page.getByRole('heading', { name: 'Sign in to Threadwork' }).waitFor();
        noErrors(errors);
      } finally {
        await page.close();
      }
    },
  );

  it('shows a second user none of the first one’s threads, and a guessed thread URL as not found', async () => {
    expect(threadPath).toMatch(/^\/threads\/.+/);
    const made = stack.admin('login-link', '--user', 'bob', '--minutes', '5', '--origin', base);
    expect(made.status, made.stderr).toBe(0);
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      await signInByLink(page, made.stdout.trim().split('\n').at(-1)!, 'bob');
      await page.getByRole('heading', { name: 'Work', level: 1 }).waitFor();
      await page.locator('main [aria-busy="true"]').waitFor({ state: 'detached' });
      expect(await page.getByTestId('thread').count()).toBe(0);
      expect(await page.locator('main').innerText()).not.toContain(PROMPT);
      await shot(page, '7-second-user');

      await page.goto(`${base}${threadPath}`);
      await page.getByRole('heading', { name: 'Not found', level: 1 }).waitFor();
      expect(await page.locator('main').innerText()).not.toContain(PROMPT);
      await shot(page, '8-not-found');
      // The page asked, and was told 404: that one console line is the refusal itself.
      expect(errors.unexpected((message) => /404/.test(message.text()))).toEqual([]);
    } finally {
      await page.close();
    }
  });
});
