import { existsSync, mkdirSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ThreadWithRun } from '@threadwork/contracts';
import { connectMongo, serviceDbName } from '@threadwork/platform';
import { createBareRepo, waitFor } from '@threadwork/testing';
import type { ConsoleMessage, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProcessStack, type ProcessStack } from '../support/process-stack.js';
import { chromiumMissing, launchChromium, watchErrors, type Browser } from './browser.js';

// The Thread page as a newcomer meets it: `npm start` in demo mode (the scripted agent of DESIGN.md
// section 4b), signed in by the login link the stack prints, a plan-mode thread whose agent asks a
// question, answered in the page, the run followed live to its end over SSE.

const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist', import.meta.url));
const RESULTS = fileURLToPath(new URL('../../.test-results/console', import.meta.url));
const PROMPT = 'Say hello in the demo file';

if (chromiumMissing) process.stderr.write(`test/console: skipped, ${chromiumMissing}\n`);

describe.skipIf(chromiumMissing)('the Thread page in Chromium, against the demo stack', () => {
  let stack: ProcessStack;
  let browser: Browser;
  let base: string;
  /** Where the browser goes: a TCP proxy to the gateway, whose connections the test can cut. */
  let web: string;
  let proxy: TcpProxy;
  let localKey: string;
  let repositoryId: number;

  const keyFor = (login: string) => stack.admin('keys', 'create', '--user', login).stdout.trim().split('\n').at(-1)!;
  const api = (key: string, path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers },
    });
  async function createThread(key: string, prompt: string, harness = 'codex'): Promise<ThreadWithRun> {
    const res = await api(key, '/v1/threads', {
      method: 'POST',
      body: JSON.stringify({ repository_id: repositoryId, prompt, harness, collaboration_mode: 'plan' }),
    });
    expect(res.status).toBe(202);
    return ThreadWithRun.parse(await res.json());
  }

  beforeAll(async () => {
    if (!existsSync(`${CONSOLE_DIST}/index.html`)) {
      throw new Error(`no built console in ${CONSOLE_DIST}: run \`npm run build\` first`);
    }
    mkdirSync(RESULTS, { recursive: true });
    stack = await startProcessStack({ THREADWORK_DEMO: '1' });
    base = `http://127.0.0.1:${stack.port}`;
    proxy = await startTcpProxy(stack.port);
    web = `http://127.0.0.1:${proxy.port}`;
    createBareRepo(join(stack.dataDir, 'repos'), 'greetings');
    localKey = keyFor('local');
    const repos = (await (await api(localKey, '/v1/repohost/repositories')).json()) as {
      repositories: { repository_id: number; name: string }[];
    };
    repositoryId = repos.repositories.find((r) => r.name === 'greetings')!.repository_id;
    browser = await launchChromium();

    // Signed in as the printed link does it: opened in the browser, which keeps the cookie it sets.
    const printed = await waitFor(
      'the login link',
      () => /(http:\/\/\S+\/v1\/auth\/link\?code=\S+)/.exec(stack.output())?.[1],
    );
    const link = new URL(printed);
    const page = await browser.context.newPage();
    try {
      await page.goto(`${web}${link.pathname}${link.search}`);
      await page.getByTestId('user').filter({ hasText: 'Signed in as local' }).waitFor();
    } finally {
      await page.close();
    }
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await proxy?.close();
    await stack?.stop();
    stack?.cleanUp();
  });

  it('shows the question, takes the answer and follows the run live to its end', { timeout: 120_000 }, async () => {
    const thread = await createThread(localKey, PROMPT);
    const page = await browser.context.newPage();
    // A second tab on the same thread: it sees the question settled by the first, from the log.
    const other = await browser.context.newPage();
    const errors = watchErrors(page);
    const otherErrors = watchErrors(other);
    try {
      await page.goto(`${web}/threads/${thread.id}`);
      await other.goto(`${web}/threads/${thread.id}`);

      const question = page.getByTestId('interaction');
      const log = page.getByTestId('run-log');
      await question.getByRole('group', { name: /Which file should I change\?/ }).waitFor();
      await other.getByTestId('interaction').waitFor();
      await page
        .getByTestId('run-status')
        .filter({ hasText: /^waiting_for_input$/ })
        .waitFor();
      // The connection drops while the agent waits (every socket through the proxy is cut): the page
      // says so, then goes on from the last event it had, showing none twice (checked below, sequence
      // by sequence).
      const streamState = page.getByTestId('stream-state');
      await streamState.filter({ hasText: /^live$/ }).waitFor();
      const seenBefore = await log.locator('li[data-sequence]').count();
      proxy.dropAll();
      await streamState.filter({ hasText: /reconnecting/ }).waitFor();
      await streamState.filter({ hasText: /^live$/ }).waitFor();
      expect(proxy.connections()).toBeGreaterThan(0);
      expect(await log.locator('li[data-sequence]').count()).toBe(seenBefore);

      // The demo's two options (and, as Codex asks, free text under "Other").
      for (const option of ['README.md', 'NOTES.md']) {
        expect(await question.getByRole('radio', { name: new RegExp(`^${option.replace('.', '\\.')}`) }).count()).toBe(
          1,
        );
      }

      // From the keyboard: the option, then the button.
      await question.getByRole('radio', { name: /NOTES\.md/ }).focus();
      await page.keyboard.press('Space');
      expect(await question.getByRole('radio', { name: /NOTES\.md/ }).isChecked()).toBe(true);
      await question.getByRole('button', { name: 'Send answer' }).focus();
      await page.keyboard.press('Enter');
      // Settled: the form goes, the log says so.
      await question.waitFor({ state: 'detached' });

      // The run goes on and ends, shown as it happens: the command, the file, the reply.
      const status = page.getByTestId('run-status');
      await status.filter({ hasText: /^completed$/ }).waitFor({ timeout: 90_000 });
      const fileItem = log.locator('li.file').filter({ hasText: `threadwork-demo-${thread.run_id}.md` });
      await fileItem.waitFor();
      expect(await fileItem.innerText()).toMatch(/^File added: /);
      // The answer took: the line goes to NOTES.md, not to the README.
      expect(await log.locator('li.command').filter({ hasText: ">> 'NOTES.md'" }).count()).toBe(1);

      const command = log.locator('li.command').filter({ hasText: 'ls -la; git log --oneline -3' });
      expect(await command.locator('summary').innerText()).toMatch(/exit 0/);
      expect(await command.locator('details').getAttribute('open')).toBeNull();
      await command.locator('summary').focus();
      await page.keyboard.press('Enter');
      await command.locator('pre.output').waitFor();
      expect(await command.locator('pre.output').innerText()).toContain('README.md');

      // The closing reply as Markdown: its `ls -la` is code, not backticks.
      const reply = log.locator('li.message').filter({ hasText: 'This reply is scripted' });
      expect(await reply.locator('code').first().textContent()).toBe('ls -la');
      expect(await reply.innerText()).not.toContain('`');

      // Each event once, the question settled, and idle again: a new message may be sent.
      const sequences = (await log
        .locator('li[data-sequence]')
        .evaluateAll((lis) => lis.map((li) => Number(li.getAttribute('data-sequence'))))) as number[];
      expect(new Set(sequences).size).toBe(sequences.length);
      expect(sequences).toEqual([...sequences].sort((x, y) => x - y));
      const items = await log.locator('li.status').allInnerTexts();
      expect(items.filter((t) => /completed/.test(t))).toHaveLength(1);
      await log.locator('li.interaction').filter({ hasText: 'answered' }).waitFor();
      expect(await page.getByTestId('interaction').count()).toBe(0);
      await page.getByRole('button', { name: 'Send', exact: true }).waitFor();
      expect(await page.getByRole('button', { name: 'Cancel run' }).count()).toBe(0);

      // The other tab: the form went away when the settlement arrived in its log.
      await other
        .getByTestId('run-status')
        .filter({ hasText: /^completed$/ })
        .waitFor({ timeout: 90_000 });
      expect(await other.getByTestId('interaction').count()).toBe(0);
      await other.getByTestId('run-log').locator('li.interaction').filter({ hasText: 'answered' }).waitFor();

      expect(await fitsWidth(page)).toBe(true);
      await page.screenshot({ path: `${RESULTS}/thread.png`, fullPage: true });
      // Chromium logs the streams the proxy cut; they are the drop this test made, nothing else is.
      expect(errors.unexpected(isCutStream)).toEqual([]);
      expect(otherErrors.unexpected(isCutStream)).toEqual([]);
    } finally {
      await page.close();
      await other.close();
    }
  });

  it(
    'queues behind a live run, cancels it, follows the run the queue starts, and sends when idle',
    { timeout: 120_000 },
    async () => {
      const thread = await createThread(localKey, 'Wait for my word');
      const page = await browser.context.newPage();
      const errors = watchErrors(page);
      try {
        await page.goto(`${web}/threads/${thread.id}`);
        await page.getByTestId('interaction').waitFor();
        const prompt = page.getByLabel('Message for the running agent');
        await prompt.fill('Then say goodbye');
        await page.getByRole('button', { name: 'Queue' }).click();
        await page.getByRole('status').filter({ hasText: 'Queued: it starts a new run when this one ends.' }).waitFor();
        expect(await prompt.inputValue()).toBe('');

        // Cancelled while it waits: its question goes with it, and the queued message starts the next run.
        // The page's reads of the controls are answered only once that run is admitted, so whatever it
        // read of the thread at the same time is from before: it must still come to follow the new run.
        const admitted = async () => {
          const res = await api(localKey, `/v1/threads/${thread.id}`);
          const latest = ((await res.json()) as { latest_run?: { id: string } }).latest_run?.id;
          return latest !== undefined && latest !== thread.run_id;
        };
        await page.route(`**/v1/threads/${thread.id}/controls`, async (route) => {
          await waitFor('the queued run admitted', admitted).catch(() => undefined);
          await route.continue().catch(() => undefined);
        });
        await page.getByRole('button', { name: 'Cancel run' }).click();
        const runs = page.getByRole('navigation', { name: 'Runs of this thread' });
        await runs.getByRole('button').nth(1).waitFor();
        const first = runs.getByRole('button', { name: new RegExp(thread.run_id) });
        await first.filter({ hasText: 'cancelled' }).waitFor();
        // The page follows the run the queue started once it learns of it.
        const followed = runs.getByRole('button', { pressed: true }).filter({ hasNotText: thread.run_id });
        await followed.waitFor();
        const secondId = /run_\w+/.exec((await followed.textContent()) ?? '')?.[0];
        expect(secondId).toBeDefined();
        expect(secondId).not.toBe(thread.run_id);
        const second = runs.getByRole('button', { name: new RegExp(secondId!) });
        await page.getByTestId('interaction').waitFor();
        await page
          .getByTestId('run-status')
          .filter({ hasText: /^waiting_for_input$/ })
          .waitFor();

        // The first run's log, picked from the list: cancelled, and so was its question.
        await first.click();
        const log = page.getByTestId('run-log');
        await log
          .locator('li.status')
          .filter({ hasText: /→ cancelled$/ })
          .waitFor();
        await log.locator('li.interaction').filter({ hasText: 'cancelled' }).waitFor();
        expect(await page.getByTestId('interaction').count()).toBe(0);

        // The second run cancelled too, the thread is idle: a message starts a third, which is followed.
        await second.click();
        await page.getByRole('button', { name: 'Cancel run' }).click();
        await page
          .getByTestId('run-status')
          .filter({ hasText: /^cancelled$/ })
          .waitFor();
        await page.getByLabel('New message').fill('Start over');
        await page.getByRole('button', { name: 'Send', exact: true }).click();
        await runs.getByRole('button').nth(2).waitFor();
        await page.getByTestId('interaction').waitFor();
        expect(await runs.getByRole('button', { pressed: true }).textContent()).toMatch(/waiting_for_input$/);
        const conversation = await page.locator('.conversation').innerText();
        for (const said of ['Wait for my word', 'Then say goodbye', 'Start over']) expect(conversation).toContain(said);
        expect(errors.unexpected()).toEqual([]);
      } finally {
        await page.close();
      }
    },
  );

  it(
    'approves a plan once; a tab that missed the approval is told it was already answered',
    { timeout: 120_000 },
    async () => {
      // Claude Code's plan mode: after the question the agent proposes a plan and waits for approval.
      const thread = await createThread(localKey, 'Plan it first', 'claude-code');
      const page = await browser.context.newPage();
      const stale = await browser.context.newPage();
      const errors = watchErrors(page);
      const staleErrors = watchErrors(stale);
      try {
        await page.goto(`${web}/threads/${thread.id}`);
        const form = page.getByTestId('interaction');
        await form.getByRole('radio', { name: /^README\.md/ }).check();
        await form.getByRole('button', { name: 'Send answer' }).click();

        await form.getByRole('heading', { name: 'The agent proposes a plan' }).waitFor();
        // The plan as Markdown: its title a heading, its steps a list, its file names code.
        await form.getByRole('heading', { name: 'Demo plan (scripted)' }).waitFor();
        expect(await form.getByRole('listitem').count()).toBe(3);
        expect(await form.locator('li code').first().textContent()).toBe('ls -la');

        // A tab whose log never arrives (its streams are refused), so it does not see the approval.
        await stale.route('**/events/stream**', (route) => route.abort());
        await stale.goto(`${web}/threads/${thread.id}`);
        const staleForm = stale.getByTestId('interaction');
        await staleForm.getByRole('button', { name: 'Approve plan' }).waitFor();

        await form.getByRole('button', { name: 'Approve plan' }).click();
        await form.waitFor({ state: 'detached' });
        await page
          .getByTestId('run-status')
          .filter({ hasText: /^completed$/ })
          .waitFor({ timeout: 90_000 });
        const log = page.getByTestId('run-log');
        await log
          .locator('li.file')
          .filter({ hasText: `threadwork-demo-${thread.run_id}.md` })
          .waitFor();
        expect(
          await log
            .locator('li.interaction')
            .filter({ hasText: /^Plan approval answered$/ })
            .count(),
        ).toBe(1);

        await staleForm.getByLabel('What to change (for a rejection, optional)').fill('Smaller steps');
        // The page reads the interactions again on a 409; the form stays up to say what happened.
        const reread = stale.waitForResponse((r) => r.url().includes('/interactions?status=pending'));
        await staleForm.getByRole('button', { name: 'Reject plan' }).click();
        const already = staleForm.getByRole('alert').filter({ hasText: /^Already answered/ });
        await already.waitFor();
        await reread;
        await stale.evaluate('new Promise((resolve) => requestAnimationFrame(() => resolve(null)))');
        expect(await already.count()).toBe(1);
        expect(await staleForm.getByRole('button', { name: 'Reject plan' }).isDisabled()).toBe(true);

        expect(errors.unexpected()).toEqual([]);
        // The stale tab's console: its refused streams and the 409 of its late answer, nothing else.
        expect(staleErrors.unexpected((m) => isRefusedStream(m) || isLateAnswer(m))).toEqual([]);
      } finally {
        await page.close();
        await stale.close();
      }
    },
  );

  it('keeps the page alive when an agent writes hostile Markdown', { timeout: 120_000 }, async () => {
    // What a prompt-injected agent may write: a quote nested 20,000 deep (it once overflowed the
    // stack and blanked the console) and 100,000 `[` (once read in quadratic time). The reply is
    // stored as the threads service stores an assistant message, as the agent could have made it.
    const thread = await createThread(localKey, 'Read the issue and summarise it');
    const hostile = `Summary:\n\n${'>'.repeat(20_000)} deep\n\n${'['.repeat(100_000)}\n\nSign in at [https://github.com/login](https://github.example/login) or https://github.com/login.\n\nAll done.`;
    const mongo = await connectMongo({ url: stack.info().mongoUrl, appName: 'thread-page-test' });
    try {
      const messages = mongo
        .db(serviceDbName(stack.env.MONGO_DB_PREFIX ?? 'threadwork', 'threads'))
        .collection('messages');
      await messages.insertOne({
        _id: `${thread.id}/msg_hostile` as never,
        thread_id: thread.id,
        message_id: 'msg_hostile',
        role: 'assistant',
        parts: [{ type: 'text', text: hostile }],
        run_id: thread.run_id,
        visible: true,
        created_at: new Date(),
      });
    } finally {
      await mongo.close();
    }
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      await page.goto(`${web}/threads/${thread.id}`);
      const reply = page.locator('li.message.assistant').filter({ hasText: 'All done.' });
      await reply.waitFor();
      // Quotes nest 8 deep; the `>` beyond stay text, and the page around the reply is all there.
      expect(await reply.locator('blockquote').count()).toBe(8);
      expect(
        await reply
          .locator('blockquote blockquote blockquote blockquote blockquote blockquote blockquote blockquote')
          .innerText(),
      ).toContain('>'.repeat(1_000));
      expect(await reply.innerText()).toContain('['.repeat(1_000));
      // A label naming another site than the link's is followed by the host it really goes to; a
      // link that shows its own address is not.
      const spoofed = reply.getByRole('link', { name: 'https://github.com/login' }).first();
      expect(await spoofed.getAttribute('href')).toBe('https://github.example/login');
      expect(await reply.locator('.link-host').allInnerTexts()).toEqual(['(github.example)']);
      expect(await reply.getByRole('link').count()).toBe(2);
      await page.getByRole('heading', { level: 1 }).waitFor();
      await page.getByTestId('run-status').waitFor();
      // Readable at 360 px: the long runs wrap rather than widen the page.
      expect(await fitsWidth(page)).toBe(true);
      const composer = page.locator('#composer-prompt');
      await composer.fill('Still here');
      expect(await composer.inputValue()).toBe('Still here');
      expect(errors.unexpected()).toEqual([]);
    } finally {
      await page.close();
    }
  });

  it('says "not found" for a thread that is not the user’s, or none at all', async () => {
    const theirs = await createThread(keyFor('mallory'), 'Not for local');
    const page = await browser.context.newPage();
    const errors = watchErrors(page);
    try {
      for (const id of [theirs.id, 'thr_no_such_thread']) {
        await page.goto(`${web}/threads/${id}`);
        await page.getByRole('heading', { level: 1, name: 'Not found' }).waitFor();
        expect(await page.getByRole('alert').textContent()).toContain(`No thread ${id} of yours`);
        expect(await page.getByText('Not for local').count()).toBe(0);
      }
      // Chromium logs the refused reads; they are the answer the page shows.
      expect(errors.unexpected(is404)).toEqual([]);
    } finally {
      await page.close();
    }
  });
});

interface TcpProxy {
  port: number;
  /** Connections made through it so far. */
  connections(): number;
  /** Cuts every open connection, as a network drop does. */
  dropAll(): void;
  close(): Promise<void>;
}

/** Passes TCP through to the gateway on `target`, so a test can cut the browser's connections. */
async function startTcpProxy(target: number): Promise<TcpProxy> {
  const open = new Set<Socket>();
  let made = 0;
  const server = createServer((client) => {
    made += 1;
    const upstream = connect(target, '127.0.0.1');
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => made,
    dropAll: () => {
      made = 0;
      for (const socket of open) socket.destroy();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** No sideways scrolling on a 360 px wide screen. */
function fitsWidth(page: Page): Promise<boolean> {
  return page.evaluate<boolean>('document.documentElement.scrollWidth <= window.innerWidth');
}

function isCutStream(message: ConsoleMessage): boolean {
  return (
    /ERR_INCOMPLETE_CHUNKED_ENCODING/.test(message.text()) &&
    /\/v1\/runs\/[^/]+\/events\/stream/.test(message.location().url)
  );
}

function isRefusedStream(message: ConsoleMessage): boolean {
  return /ERR_FAILED/.test(message.text()) && /\/events\/stream/.test(message.location().url);
}

function isLateAnswer(message: ConsoleMessage): boolean {
  return /status of 409/.test(message.text()) && /\/v1\/interactions\/[^/]+\/answer$/.test(message.location().url);
}

function is404(message: ConsoleMessage): boolean {
  return /status of 404/.test(message.text());
}
