import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleBuilt, CONSOLE_CSP } from '../src/http/console.js';
import { buildOpenApiDocument } from '../src/openapi-document.js';
import { startHarness, type Harness } from './harness.js';

// The gateway serving a console build: the files Vite would write, in a folder of this file's own
// (the real build is served to a real browser in test/console).

const INDEX = '<!doctype html><script type="module" src="/assets/index-abc123.js"></script>';

describe('the console at /', () => {
  let dir: string;
  let harness: Harness;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'threadwork-console-'));
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), INDEX);
    writeFileSync(join(dir, 'assets', 'index-abc123.js'), 'export {};\n');
    harness = await startHarness({ peers: 'none', deps: { consoleDir: dir } });
  });
  afterAll(async () => {
    await harness?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves index.html uncached and hashed assets for good, both under the policy', async () => {
    for (const url of ['/', '/threads/thr_1?tab=runs', '/some/page/the/console/routes']) {
      const res = await harness.app.inject({ url });
      expect(res.statusCode, url).toBe(200);
      expect(res.body, url).toBe(INDEX);
      expect(res.headers['content-type'], url).toMatch(/^text\/html/);
      expect(res.headers['cache-control'], url).toBe('no-cache');
      expect(res.headers['content-security-policy'], url).toBe(CONSOLE_CSP);
      expect(res.headers['x-content-type-options'], url).toBe('nosniff');
    }
    const asset = await harness.app.inject({ url: '/assets/index-abc123.js' });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['content-type']).toMatch(/javascript/);
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(asset.headers['content-security-policy']).toBe(CONSOLE_CSP);
  });

  it('keeps the API’s answers under /v1 and does not answer a missing asset with a page', async () => {
    const caller = await harness.caller();
    const unknown = await harness.app.inject({ url: '/v1/no-such-route', headers: caller.headers });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ error: { code: 'not_found' } });
    expect((await harness.app.inject({ url: '/v1/work' })).statusCode).toBe(401);
    expect((await harness.app.inject({ url: '/assets/index-gone00.js' })).statusCode).toBe(404);
    expect((await harness.app.inject({ method: 'POST', url: '/' })).statusCode).toBe(404);
  });

  it('leaves its routes out of the OpenAPI document', async () => {
    const served = (await harness.app.inject({ url: '/v1/openapi.json' })).json<unknown>();
    expect(served).toEqual(await buildOpenApiDocument());
  });
});

describe('a gateway without a built console', () => {
  it('is told apart from one with it', () => {
    const empty = mkdtempSync(join(tmpdir(), 'threadwork-console-'));
    try {
      expect(consoleBuilt(empty)).toBe(false);
      expect(consoleBuilt('')).toBe(false);
      writeFileSync(join(empty, 'index.html'), INDEX);
      expect(consoleBuilt(empty)).toBe(true);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('serves the API and answers / with the API’s 404', async () => {
    const harness = await startHarness({ peers: 'none' });
    try {
      expect((await harness.app.inject({ url: '/' })).statusCode).toBe(404);
      expect((await harness.app.inject({ url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await harness.close();
    }
  });
});

describe('the document the console is typed from', () => {
  it('is the one GET /v1/openapi.json serves, built without NATS or a database', async () => {
    const harness = await startHarness({ peers: 'none' });
    try {
      const served = (await harness.app.inject({ url: '/v1/openapi.json' })).json<unknown>();
      expect(await buildOpenApiDocument()).toEqual(served);
    } finally {
      await harness.close();
    }
  });
});
