import { createHash, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { githubSchemas } from '../github-schemas.js';
import { createAuth } from './auth.js';
import { gitHttp } from './git-http.js';
import { HttpError, parseJsonBody, readBody, sendJson } from './http.js';
import { createOAuth } from './oauth.js';
import { createRestApi } from './rest.js';
import { createShapes } from './shapes.js';
import { GitHubState } from './state.js';
import type { FakeGitHub, FakeGitHubOptions } from './types.js';
import { createWebhooks } from './webhooks.js';

export { pushBranch } from './git-http.js';
export type * from './types.js';
export { signWebhook } from './webhooks.js';

// A fake GitHub on 127.0.0.1 for tests of the GitHub App integration. It speaks the REST shapes
// of the endpoints Threadwork calls (under `/api/v3`, as GitHub Enterprise does, so the base URL
// with a path is exercised), checks the app JWT (RS256) against the app's public key and the
// installation and user tokens it issued, and serves real git smart HTTP over bare repositories
// through `git http-backend`, so `git clone` and `git push` work against it with an installation
// token as the password. Its web side has the app's install page (which installs the app for the
// login given in an `x-fake-login` header, or on an organisation it owns, and redirects to the
// setup URL) and the OAuth web flow (the authorize page and the code exchange: oauth.ts). Webhooks
// are sent signed to the configured URL by the helpers. Every success answer and every webhook is
// checked against GitHub's published OpenAPI descriptions as it goes out (the OAuth web pages are
// not in them: oauth.ts follows GitHub's documented web flow).
//
// Every part reads and changes one GitHubState; this file only puts the parts behind one server.

export async function startFakeGitHub(options: FakeGitHubOptions): Promise<FakeGitHub> {
  const publicKey = typeof options.publicKey === 'string' ? createPublicKey(options.publicKey) : options.publicKey;
  const root = mkdtempSync(join(tmpdir(), 'threadwork-fake-github-'));
  const server = createServer((req, res) => {
    void route(req, res).catch((err: unknown) => {
      if (err instanceof HttpError) {
        if (!res.headersSent) sendJson(res, err.status, { message: err.message, ...err.extra });
        else res.end();
        return;
      }
      if (!res.headersSent) sendJson(res, 500, { message: err instanceof Error ? err.message : String(err) });
      else res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const webUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const apiUrl = `${webUrl}/api/v3`;

  const state = new GitHubState(root, webUrl);
  const schemas = githubSchemas();
  const shapes = createShapes(state, schemas, options, apiUrl);
  const auth = createAuth(state, shapes, {
    appId: options.appId,
    publicKey,
    tokenTtlMs: options.tokenTtlMs ?? 60 * 60 * 1000,
  });
  const rest = createRestApi(state, shapes, schemas, auth, apiUrl);
  const web = createOAuth(
    state,
    () => fake.setupUrl,
    options.oauth,
    () => fake.callbackUrl,
  );
  const webhooks = createWebhooks(state, shapes, schemas, options, { apiUrl, webhookUrl: () => fake.webhookUrl });

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', webUrl);
    const path = url.pathname;
    if (path.startsWith('/api/v3/')) {
      const apiPath = path.slice('/api/v3'.length);
      state.requests.push(`${req.method} ${apiPath}`);
      const failure = state.failures.find((f) => f.left > 0 && f.method === req.method && f.path.test(apiPath));
      if (failure) {
        failure.left--;
        throw new HttpError(failure.status, failure.message, {
          documentation_url: 'https://docs.github.com/rest',
          ...failure.extra,
        });
      }
      const body = req.method === 'GET' ? {} : parseJsonBody(await readBody(req));
      const answer = rest({ req, query: url.searchParams, body }, apiPath);
      const hold = state.holds.find((h) => !h.taken && h.method === req.method && h.path.test(apiPath));
      if (hold) {
        hold.taken = true;
        hold.arrived();
        await hold.released;
      }
      return sendJson(res, answer.status, answer.body);
    }
    if (/^\/[^/]+\/[^/]+\.git(\/|$)/.test(path)) return gitHttp(state, req, res, url);
    if (req.method === 'GET' && path === `/apps/${options.slug}/installations/new`)
      return web.installPage(req, res, url);
    if (req.method === 'GET' && path === '/login/oauth/authorize') return web.authorizePage(req, res, url);
    if (req.method === 'POST' && path === '/login/oauth/access_token') return web.oauthExchange(req, res);
    throw new HttpError(404, 'Not Found');
  }

  const fake: FakeGitHub = {
    webUrl,
    apiUrl,
    setupUrl: `${webUrl}/setup-not-configured`,
    callbackUrl: `${webUrl}/callback-not-configured`,
    webhookUrl: `${webUrl}/webhook-not-configured`,
    accounts: state.accounts,
    memberships: state.memberships,
    repositories: state.repositories,
    installations: state.installations,
    pulls: state.pulls,
    checkRuns: state.checkRuns,
    statuses: state.statuses,
    jwtsSeen: state.jwtsSeen,
    tokensIssued: state.tokensIssued,
    requests: state.requests,
    schemaProblems: state.schemaProblems,
    account: (login, type) => state.account(login, type),
    addMember: (org, login, role) => state.addMember(org, login, role),
    addRepository: (owner, name, opts) => state.addRepository(owner, name, opts),
    repository: (fullName) => state.repository(fullName),
    install: (login, opts) => state.install(login, opts),
    cloneUrl: (fullName) => `${webUrl}/${state.repository(fullName).full_name}.git`,
    branchSha: (fullName, branch) => state.branchSha(state.repository(fullName), branch),
    oauthCode: (login) => state.oauthCode(login),
    renameAccount: (from, to) => state.renameAccount(from, to),
    addCheckRun: (fullName, sha, run) => state.addCheckRun(fullName, sha, run),
    updateCheckRun: (checkId, change) => state.updateCheckRun(checkId, change),
    setStatus: (fullName, sha, status) => state.setStatus(fullName, sha, status),
    failNext(method, path, { status, message, extra = {}, times = 1 }) {
      state.failures.push({ method, path, status, message, extra, left: times });
    },
    holdNext(method, path) {
      let arrive = (): void => {};
      let release = (): void => {};
      const arrived = new Promise<void>((resolve) => (arrive = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      state.holds.push({ method, path, arrived: arrive, released, taken: false });
      return { arrived, release };
    },
    sendWebhook: webhooks.sendWebhook,
    payloads: webhooks.payloads,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(root, { recursive: true, force: true });
      if (state.schemaProblems.length > 0) {
        throw new Error(
          `the fake GitHub strayed from GitHub's descriptions:\n${[...new Set(state.schemaProblems)].join('\n')}`,
        );
      }
    },
  };
  return fake;
}

/**
 * What a client of the install flow keeps and sends: a random PKCE verifier, and its S256
 * challenge (base64url(SHA-256(verifier))) for `POST /v1/repohost/install-session`.
 */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** An RSA key pair like the one GitHub issues for an app (the private key in PKCS#1 PEM). */
export function generateAppKeyPair(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { privateKey, publicKey };
}
