import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type ConsoleMessage, type Page } from 'playwright-core';

/** Debian's `chromium` package (deploy/local/tools.mjs installs it for `npm test`); CHROMIUM_PATH overrides. */
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const chromiumMissing = existsSync(CHROMIUM_PATH)
  ? null
  : `no Chromium at ${CHROMIUM_PATH} (Debian: apt-get install chromium, or set CHROMIUM_PATH)`;

/**
 * Everything Chromium would fetch or phone home for on its own is off: the test machine's network
 * is closed, and without these flags Chromium's refused connections pile up many at a time.
 */
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** A headless Chromium on a new, empty profile, removed when closed. */
export async function launchChromium(): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'threadwork-chromium-'));
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: ARGS,
      viewport: { width: 360, height: 800 },
    });
    return {
      context,
      async close() {
        await context.close();
        rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw err;
  }
}

/** What a page said went wrong, as it happens: console errors and uncaught exceptions. */
export interface PageErrors {
  console: ConsoleMessage[];
  uncaught: string[];
  /** Everything, described, but the console errors `expected` accepts. */
  unexpected(expected?: (message: ConsoleMessage) => boolean): string[];
}

export function watchErrors(page: Page): PageErrors {
  const errors: PageErrors = {
    console: [],
    uncaught: [],
    unexpected: (expected = () => false) => [
      ...errors.console
        .filter((message) => !expected(message))
        .map((message) => `console: ${message.text()} (${message.location().url})`),
      ...errors.uncaught.map((message) => `uncaught: ${message}`),
    ],
  };
  page.on('console', (message) => {
    if (message.type() === 'error') errors.console.push(message);
  });
  page.on('pageerror', (err) => errors.uncaught.push(err.message));
  return errors;
}
