import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  domainEvents,
  HarnessList,
  MessageAccepted,
  ReviewEvidence,
  Thread,
  ThreadWithRun,
  WorkList,
} from '@threadwork/contracts';
import { SESSION_COOKIE, signSession } from '@threadwork/gateway';
import { jetStreamOf, type JetStreamHandles } from '@threadwork/platform';
import {
  candidateProduced,
  pushAsRunner,
  RunDriver,
  waitFor,
  type FakeGitHub,
  type FakeRepository,
} from '@threadwork/testing';
import type { ConsoleMessage, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { linkInstallation, startGitHubStack, type GitHubStack } from '../support/github.js';
import { json } from '../support/http.js';
import type { Stack, TestUser } from '../support/stack.js';
import { chromiumMissing, launchChromium, watchErrors, type Browser } from './browser.js';

// The New thread and Review pages as a user meets them: a real stack acting as a GitHub App
// against the fake GitHub (so a candidate becomes a real pull request with checks), the built
// console in a real headless Chromium at 360 px, signed in with a session cookie. The test stands
// in for the runner through the runs service's internal API, the way the runner reports a candidate.

const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist', import.meta.url));
const RESULTS = fileURLToPath(new URL('../../.test-results/console', import.meta.url));
const SESSION_SECRET = 'a-console-review-session-secret-of-32-characters';
const HOSTILE = '<img src=x onerror="document.title=`owned`">';
const LONG_LINE = `const banner = '${'threadwork '.repeat(30).trim()}';`;

if (chromiumMissing) process.stderr.write(`test/console: skipped, ${chromiumMissing}\n`);

describe.skipIf(chromiumMissing)('the New thread and Review pages in Chromium', () => {
  let gh: GitHubStack;
  let stack: Stack;
  let fake: FakeGitHub;
  let jetstream: JetStreamHandles;
  let alice: TestUser;
  let gizmos: FakeRepository;
  let browser: Browser;

  beforeAll(async () => {
    if (!existsSync(`${CONSOLE_DIST}/index.html`)) {
      throw new Error(`no built console in ${CONSOLE_DIST}: run \`npm run build\` first`);
    }
    mkdirSync(RESULTS, { recursive: true });
    gh = await startGitHubStack(
      {
        appId: 778,
        slug: 'threadwork-console',
        webhookSecret: 'console-webhook-secret',
        scheme: 'twconsole',
        oauth: { clientId: 'Iv1.console', clientSecret: 'console-client-secret' },
      },
      {
        SESSION_SECRET,
        CONSOLE_DIR: CONSOLE_DIST,
        HARNESSES: 'codex,claude-code',
        // Publications move by webhooks here, not by syncs on read.
        PUBLICATION_SYNC_MS: String(60 * 60_000),
      },
    );
    ({ stack, fake } = gh);
    gizmos = fake.addRepository('alice-gh', 'gizmos', {
      branch: 'trunk',
      files: { 'README.md': '# gizmos\n\nSmall parts.\n', 'src/banner.ts': "const banner = 'old';\n" },
    });
    fake.addRepository('alice-gh', 'widgets', { branch: 'trunk' });
    jetstream = await jetStreamOf(stack.nc);
    alice = await stack.createUser('console-alice');
    await linkInstallation(gh, alice, 'alice-gh');
    browser = await launchChromium();
    await browser.context.addCookies([
      {
        name: SESSION_COOKIE,
        value: signSession(alice.id, Math.floor(Date.now() / 1000) + 3600, SESSION_SECRET),
        url: stack.baseUrl,
        httpOnly: true,
        sameSite: 'Lax',
      },
    ]);
  });
  afterAll(async () => {
    await browser?.close();
    await gh?.stop();
  });

  it('creates a thread from the New thread page, from the keyboard, keeping the form through a refusal', async () => {
    const { harnesses } = await json(await stack.fetch('/v1/harnesses', { user: alice }), 200, HarnessList);
    const codex = harnesses.find((h) => h.id === 'codex')!;
    const claude = harnesses.find((h) => h.id === 'claude-code')!;
    expect(codex.default).toBe(true);
    const prompt = 'Tidy the banner and write a changelog';

    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      await page.goto(`${stack.baseUrl}/`);
      await page.getByRole('heading', { name: 'Work' }).waitFor();
      await page.getByRole('main').getByRole('link', { name: 'New thread' }).click();
      await page.waitForURL(`${stack.baseUrl}/new`);
      expect(
        await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'New thread' }).count(),
      ).toBe(1);

      // The default harness and its defaults are preselected; another harness brings its own.
      const harness = page.getByLabel('Harness');
      const model = page.getByLabel('Model');
      const effort = page.getByLabel('Reasoning effort');
      await expectValue(harness, 'codex');
      await expectValue(model, codex.default_model);
      await expectValue(effort, codex.default_reasoning_effort);
      expect(await effort.locator('option').allTextContents()).toEqual(codex.reasoning_efforts);
      await harness.selectOption('claude-code');
      await expectValue(model, claude.default_model);
      await expectValue(effort, claude.default_reasoning_effort);
      expect(await effort.locator('option').allTextContents()).toEqual(claude.reasoning_efforts);
      await effort.selectOption('max');
      await page.getByLabel('Collaboration mode').selectOption('plan');

      // The repository, found by search and picked from the keyboard.
      const search = page.getByLabel('Search repositories');
      await search.focus();
      await page.keyboard.type('gizm');
      const list = page.getByRole('listbox', { name: /^Repository/ });
      await waitFor('the search to narrow to gizmos', async () => {
        const options = await list.locator('option').allTextContents();
        return options.length === 1 && options[0] === 'alice-gh/gizmos' ? true : undefined;
      });
      // Down from the search box: the first result, picked, with the focus in the list.
      await page.keyboard.press('ArrowDown');
      expect(await list.evaluate((el) => el === el.ownerDocument.activeElement)).toBe(true);
      await page.getByTestId('chosen-repository').filter({ hasText: 'alice-gh/gizmos' }).waitFor();

      await page.getByLabel('Prompt').fill(prompt);
      // A branch name git refuses: the API says why, beside the form, and nothing typed is lost.
      const badBranch = 'bad..branch';
      const branch = page.getByLabel(/^Base branch/);
      await branch.fill(badBranch);
      await branch.press('Enter');
      const refusal = await stack.fetch('/v1/threads', {
        method: 'POST',
        user: alice,
        body: JSON.stringify({ repository_id: gizmos.id, prompt, branch: badBranch }),
      });
      const { error } = (await json(refusal, 400)) as { error: { message: string } };
      const alert = page.getByTestId('form-error');
      await alert.waitFor();
      expect(await alert.textContent()).toBe(error.message);
      expect(await alert.getAttribute('role')).toBe('alert');
      expect(page.url()).toBe(`${stack.baseUrl}/new`);
      await expectValue(page.getByLabel('Prompt'), prompt);
      await expectValue(harness, 'claude-code');
      await expectValue(effort, 'max');
      await expectValue(list, String(gizmos.id));
      await expectValue(branch, badBranch);
      expect(await fitsWidth(page)).toBe(true);
      await page.screenshot({ path: `${RESULTS}/new-thread.png`, fullPage: true });

      // Keyboard only: clear the branch, Tab to the button, Enter.
      await branch.focus();
      await page.keyboard.press('ControlOrMeta+A');
      await page.keyboard.press('Backspace');
      await page.keyboard.press('Tab');
      expect(await page.evaluate('document.activeElement?.textContent')).toBe('Create thread');
      await page.keyboard.press('Enter');
      await page.waitForURL(/\/threads\/[^/]+$/);
      const threadId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2]!);
      await page.getByRole('heading', { level: 1 }).waitFor();

      const thread = await json(await stack.fetch(`/v1/threads/${threadId}`, { user: alice }), 200, Thread);
      expect(thread).toMatchObject({
        harness: 'claude-code',
        model: claude.default_model,
        reasoning_effort: 'max',
        collaboration_mode: 'plan',
      });
      const work = await json(await stack.fetch('/v1/work', { user: alice }), 200, WorkList);
      const project = work.projects.find((p) => p.threads.some((t) => t.id === threadId))!;
      expect(project.threads.find((t) => t.id === threadId)!.prompt).toBe(prompt);
      expect(project.repositories[0]).toMatchObject({ repository_id: gizmos.id, full_name: 'alice-gh/gizmos' });
      // Chromium logs every refused request as an error; the refusal of the bad branch is the one
      // this test asked for. Anything else is a fault.
      expect(errors.unexpected(isOneRefusal())).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('reviews a candidate: stats, files, the diff as text, the pull request and its checks', async () => {
    const created = await json(
      await stack.fetch('/v1/threads', {
        method: 'POST',
        user: alice,
        body: JSON.stringify({ repository_id: gizmos.id, prompt: 'Write the changelog' }),
      }),
      202,
      ThreadWithRun,
    );
    const threadId = created.id;
    const projectRepositoryId = await primaryRepositoryOf(threadId);
    const branch = `threadwork/${threadId}`;

    // The runner's part: the branch pushed with real git, the candidate reported under its claim.
    const runner = await RunDriver.claim(stack.nc, created.run_id);
    await runner.start();
    const pushed = await pushAsRunner(stack.nc, fake, {
      run_id: created.run_id,
      claim_id: runner.claimId,
      repository: gizmos,
      branch,
      files: {
        'CHANGELOG.md': `# Changelog\n\n- the banner is new\n- ${HOSTILE}\n`,
        'src/banner.ts': `${LONG_LINE}\nexport default banner;\n`,
      },
    });
    const candidate = gitCandidate(gizmos.bare, pushed.baseRevision, pushed.revision);
    expect(candidate.stats).toEqual({ additions: 6, deletions: 1 });
    await runner.publish(
      jetstream.js,
      domainEvents.candidateProduced,
      candidateProduced({
        thread_id: threadId,
        run_id: created.run_id,
        owner_id: alice.id,
        project_repository_id: projectRepositoryId,
        repository_id: gizmos.id,
        branch,
        base_revision: pushed.baseRevision,
        candidate_revision: pushed.revision,
        ...candidate,
      }),
      `${created.run_id}:${projectRepositoryId}`,
    );
    await runner.to('completed');

    const opened = await waitFor('the pull request', async () => {
      const got = await evidenceOf(threadId, projectRepositoryId);
      return got.publication && got.diff.status === 'ready' ? got : undefined;
    });
    const check = fake.addCheckRun('alice-gh/gizmos', pushed.revision, {
      name: 'build',
      status: 'completed',
      conclusion: 'success',
      started_at: new Date().toISOString(),
      completed_at: new Date().toISOString(),
    });
    expect((await fake.sendWebhook('check_run', fake.payloads.checkRun('completed', check.id))).status).toBe(202);
    await waitFor('the green check', async () => {
      const got = await evidenceOf(threadId, projectRepositoryId);
      return got.publication?.checksAggregate === 'success' ? got : undefined;
    });

    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      await page.goto(`${stack.baseUrl}/threads/${threadId}`);
      await page.getByRole('link', { name: 'Review the changes' }).click();
      await page.waitForURL(`${stack.baseUrl}/threads/${threadId}/review`);
      const files = page.getByTestId('diff-file');
      await files.first().waitFor();

      const stats = await page.getByTestId('review-stats').innerText();
      expect(stats).toMatch(/Added\s+\+6/);
      expect(stats).toMatch(/Removed\s+−1/);
      expect(stats).toMatch(/Files\s+2/);
      expect(await page.getByTestId('review-files').locator('li').allInnerTexts()).toEqual([
        'added CHANGELOG.md',
        'modified src/banner.ts',
      ]);
      expect(await page.getByTestId('truncated').count()).toBe(0);

      // The diff: a section per file, lines numbered and marked, the agent's text shown as text.
      expect(await files.locator('summary .diff-path').allTextContents()).toEqual(['CHANGELOG.md', 'src/banner.ts']);
      const changelog = files.filter({ has: page.locator('summary', { hasText: 'CHANGELOG.md' }) });
      const added = changelog.locator('tr.diff-add');
      expect(await added.count()).toBe(4);
      expect(await added.nth(2).locator('td').allTextContents()).toEqual(['', '3', '+- the banner is new']);
      expect(await added.nth(3).locator('td.diff-code').textContent()).toBe(`+- ${HOSTILE}`);
      expect(await page.locator('main img').count()).toBe(0);
      expect(await page.title()).not.toBe('owned');
      const banner = files.filter({ has: page.locator('summary', { hasText: 'src/banner.ts' }) });
      expect(await banner.locator('tr.diff-del td').allTextContents()).toEqual(['1', '', "-const banner = 'old';"]);
      expect(await banner.locator('tr.diff-add td.diff-code').first().textContent()).toBe(`+${LONG_LINE}`);

      // The long line scrolls inside the diff's box; the page itself fits 360 px.
      const scroller = banner.locator('.diff-scroll');
      expect(await scroller.evaluate((el) => el.scrollWidth > el.clientWidth)).toBe(true);
      expect(await fitsWidth(page)).toBe(true);

      // The pull request and its check.
      const pr = page.getByTestId('pull-request');
      const prLink = pr.getByRole('link', { name: `#${opened.publication!.prNumber}` });
      expect(await prLink.getAttribute('href')).toBe(opened.publication!.prUrl);
      expect(await pr.innerText()).toContain('draft');
      const checkRow = pr.getByTestId('checks').locator('li');
      expect(await checkRow.innerText()).toMatch(/build\s+completed · success/);
      expect(await checkRow.getByRole('link', { name: 'build' }).getAttribute('href')).toBe(check.details_url);
      await page.screenshot({ path: `${RESULTS}/review.png`, fullPage: true });

      // Each file's section folds from the keyboard.
      const summary = banner.locator('summary');
      await summary.focus();
      await page.keyboard.press('Enter');
      expect(await banner.evaluate((el) => (el as unknown as { open: boolean }).open)).toBe(false);
      expect(await scroller.isVisible()).toBe(false);
      await page.keyboard.press('Enter');
      expect(await scroller.isVisible()).toBe(true);
      expect(errors.unexpected()).toEqual([]);
    } finally {
      await page.close();
    }

    // A later candidate cut at its bound says so plainly.
    const next = await waitFor('the thread to take a follow-up', async () => {
      const res = await stack.fetch(`/v1/threads/${threadId}/messages`, {
        method: 'POST',
        user: alice,
        body: JSON.stringify({ prompt: 'Now the whole history' }),
      });
      return res.status === 202 ? MessageAccepted.parse(await res.json()) : undefined;
    });
    const second = await RunDriver.claim(stack.nc, next.run_id);
    await second.start();
    const cut = candidate.diff.split('\n').slice(0, 8).join('\n') + '\n';
    await second.publish(
      jetstream.js,
      domainEvents.candidateProduced,
      candidateProduced({
        thread_id: threadId,
        run_id: next.run_id,
        owner_id: alice.id,
        project_repository_id: projectRepositoryId,
        repository_id: gizmos.id,
        branch,
        diff: cut,
        truncated: true,
        files: candidate.files,
        stats: candidate.stats,
      }),
      `${next.run_id}:${projectRepositoryId}`,
    );
    await waitFor('the cut candidate', async () =>
      (await evidenceOf(threadId, projectRepositoryId)).diff.truncated ? true : undefined,
    );
    const again = await browser.context.newPage();
    const moreErrors = watchErrors(again);
    try {
      await again.goto(`${stack.baseUrl}/threads/${threadId}/review?repository=${projectRepositoryId}`);
      const note = again.getByTestId('truncated');
      await note.waitFor();
      expect(await note.textContent()).toMatch(/cut at its size limit/);
      expect(await again.getByTestId('diff-status').textContent()).toMatch(/still working/);
      expect(await again.getByTestId('diff-file').count()).toBe(1);
      expect(await again.getByTestId('review-files').locator('li').count()).toBe(2);
      expect(await fitsWidth(again)).toBe(true);
      expect(moreErrors.unexpected()).toEqual([]);
    } finally {
      await again.close();
    }
  });

  it('says so when the thread or the repository is not there', async () => {
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      await page.goto(`${stack.baseUrl}/threads/thr_nowhere/review`);
      await page.getByRole('alert').filter({ hasText: 'No such thread.' }).waitFor();
      const created = await json(
        await stack.fetch('/v1/threads', {
          method: 'POST',
          user: alice,
          body: JSON.stringify({ repository_id: gizmos.id, prompt: 'Nothing yet' }),
        }),
        202,
        ThreadWithRun,
      );
      await page.goto(`${stack.baseUrl}/threads/${created.id}/review?repository=prr_elsewhere`);
      await page.getByRole('alert').filter({ hasText: 'No review for this thread and repository.' }).waitFor();
      // Before any candidate: said plainly, with nothing to list.
      await page.goto(`${stack.baseUrl}/threads/${created.id}/review`);
      expect(await page.getByTestId('diff-status').textContent()).toBe('No run has produced a candidate yet.');
      expect(await page.getByRole('main').innerText()).toContain('No pull request has been opened yet.');
      expect(await page.getByRole('main').innerText()).toContain('No files changed.');
      // Chromium logs the two refused reads (404) as errors: the answers the page asked for.
      expect(errors.unexpected((message) => /status of 404/.test(message.text()))).toEqual([]);
      expect(errors.console.filter((message) => /status of 404/.test(message.text()))).toHaveLength(2);
    } finally {
      await page.close();
    }
  });

  async function primaryRepositoryOf(threadId: string): Promise<string> {
    const work = await json(await stack.fetch('/v1/work', { user: alice }), 200, WorkList);
    return work.projects.find((p) => p.threads.some((t) => t.id === threadId))!.repositories[0]!.id;
  }

  async function evidenceOf(threadId: string, projectRepositoryId: string) {
    const res = await stack.fetch(
      `/v1/threads/${threadId}/review?project_repository_id=${encodeURIComponent(projectRepositoryId)}`,
      { user: alice },
    );
    return json(res, 200, ReviewEvidence);
  }
});

/** What the runner reports of a candidate, made by real git from the pushed branch (as the runner does). */
function gitCandidate(bare: string, base: string, head: string) {
  const git = (...args: string[]) => execFileSync('git', ['--git-dir', bare, ...args], { encoding: 'utf8' });
  const diff = git('diff', '--no-color', '--no-ext-diff', '-M', base, head, '--');
  const files = git('diff', '--no-ext-diff', '--name-status', '-M', base, head, '--')
    .trim()
    .split('\n')
    .map((line) => {
      const [code, path] = line.split('\t');
      return { path: path!, status: code === 'A' ? 'added' : code === 'D' ? 'deleted' : 'modified' };
    });
  let additions = 0;
  let deletions = 0;
  for (const line of git('diff', '--no-ext-diff', '--numstat', '-M', base, head, '--').trim().split('\n')) {
    const [add, del] = line.split('\t');
    additions += Number(add);
    deletions += Number(del);
  }
  return { diff, files, stats: { additions, deletions }, truncated: false };
}

async function expectValue(locator: ReturnType<Page['locator']>, value: string): Promise<void> {
  expect(await locator.inputValue()).toBe(value);
}

/** Accepts the first 400 of POST /v1/threads, once. */
function isOneRefusal(): (message: ConsoleMessage) => boolean {
  let seen = false;
  return (message) => {
    const refusal =
      !seen && /status of 400/.test(message.text()) && new URL(message.location().url).pathname === '/v1/threads';
    if (refusal) seen = true;
    return refusal;
  };
}

/** No sideways scrolling on a 360 px wide screen. */
function fitsWidth(page: Page): Promise<boolean> {
  // A string: this file is compiled without the DOM's types, and the expression runs in the page.
  return page.evaluate<boolean>('document.documentElement.scrollWidth <= window.innerWidth');
}
