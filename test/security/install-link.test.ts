import { ProviderConnection, RepositoryList } from '@threadwork/contracts';
import { pkcePair, type FakeGitHub, type FakeRepository } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  installInBrowser,
  linkInstallation,
  redeemInstallation,
  startGitHubStack,
  startInstallSession,
  type GitHubStack,
} from '../support/github.js';
import type { Stack, TestUser } from '../support/stack.js';

// Who gets an installation linked. The attacker is on the internet with a Threadwork account of
// her own; the victim administers a GitHub organisation. Everything real — the services as in
// production (NODE_ENV=production: the OAuth client is mandatory), the HTTP API — against the fake
// GitHub (install page, OAuth, organisation membership with its roles).
//
// The install flow's rule: the setup callback links nothing; it hands a one-time code to the
// install session's `return_to` — the app on the device whose browser completed the setup — and
// only the caller who created the session, with the PKCE verifier behind its challenge, redeems
// it. With OAuth, the GitHub user who completed the setup must administer the installation's
// account (be that user, or an active admin of that organisation) — seeing it is not enough — and
// must be the GitHub user the redeeming caller is verified as (one each way, decided by unique
// inserts).

let gh: GitHubStack;
let stack: Stack;
let fake: FakeGitHub;
let payroll: FakeRepository;

beforeAll(async () => {
  gh = await startGitHubStack(
    {
      appId: 31337,
      slug: 'threadwork-sec',
      webhookSecret: 'install-link-webhook-secret',
      scheme: 'twsec',
      oauth: { clientId: 'Iv1.sec', clientSecret: 'sec-client-secret' },
    },
    { NODE_ENV: 'production', SESSION_SECRET: 'install-link-test-session-secret-0123456789' },
  );
  ({ stack, fake } = gh);
  // Organisations whose admins will be lured, each with a private repository worth stealing.
  for (const [org, admin] of [
    ['acme-corp', 'victim-gh'],
    ['globex', 'victim2-gh'],
    ['initech', 'victim3-gh'],
    ['umbrella', 'victim4-gh'],
  ] as const) {
    fake.addMember(org, admin, 'admin');
    fake.addRepository(org, 'secrets');
  }
  fake.addMember('acme-corp', 'intern-gh', 'member');
  payroll = fake.addRepository('acme-corp', 'payroll');
  for (const login of ['mallory-gh', 'mallory2-gh']) fake.addRepository(login, 'dotfiles');
});

afterAll(async () => {
  await gh?.stop();
});

const post = (path: string, user: TestUser, body: unknown) =>
  stack.fetch(path, { method: 'POST', user, body: JSON.stringify(body) });

const startSession = (user: TestUser) => startInstallSession(gh, user);

/** What reaches the app at `return_to` when `login` installs the app on `target` through `installUrl`. */
const browserInstalls = async (login: string, installUrl: string, target = login) =>
  (await installInBrowser(gh, login, installUrl, target)).returned;

const redeem = (user: TestUser, code: string, verifier: string) => redeemInstallation(gh, user, code, verifier);

async function refused(res: Response, message: RegExp): Promise<void> {
  expect(res.status).toBe(400);
  const body = (await res.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe('invalid_request');
  expect(body.error.message).toMatch(message);
}

async function connection(user: TestUser): Promise<ProviderConnection> {
  const res = await stack.fetch('/v1/repohost/connection', { user });
  expect(res.status).toBe(200);
  return ProviderConnection.parse(await res.json());
}

async function repositoryNames(user: TestUser): Promise<string[]> {
  const res = await stack.fetch('/v1/repohost/repositories', { user });
  expect(res.status).toBe(200);
  return RepositoryList.parse(await res.json()).repositories.map((r) => r.full_name);
}

const installationOf = (account: string) => [...fake.installations.values()].find((i) => i.account.login === account);

/**
 * GitHub's setup callback as a browser signed in to GitHub as `login` follows it back, naming an
 * installation that already exists (GitHub sends `setup_action=update` when its settings are
 * saved): what reaches the app at `return_to`.
 */
async function setupCallback(state: string, installationId: number, login: string): Promise<Record<string, string>> {
  const url = new URL(`${stack.baseUrl}/v1/repohost/setup`);
  url.searchParams.set('installation_id', String(installationId));
  url.searchParams.set('setup_action', 'update');
  url.searchParams.set('state', state);
  url.searchParams.set('code', fake.oauthCode(login));
  const res = await fetch(url, { redirect: 'manual' });
  expect(res.status).toBe(302);
  return Object.fromEntries(new URL(res.headers.get('location')!).searchParams);
}

/** Nothing of `org` reaches `user`: no installation, no repository, no thread on it. */
async function seesNothingOf(user: TestUser, org: string): Promise<void> {
  expect((await connection(user)).installations.map((i) => i.account)).not.toContain(org);
  expect((await repositoryNames(user)).filter((name) => name.startsWith(`${org}/`))).toEqual([]);
}

describe('the legitimate path', () => {
  it('links an organisation installation to the admin who installed it, through the code and verifier', async () => {
    const owner = await stack.createUser('acme-owner');
    const session = await startSession(owner);
    const returned = await browserInstalls('victim-gh', session.installUrl, 'acme-corp');
    const installation = installationOf('acme-corp')!;
    expect(returned).toEqual({
      outcome: 'installed',
      installation_id: String(installation.id),
      code: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    // The callback alone linked nothing.
    expect((await connection(owner)).status).toBe('not_connected');

    const res = await redeem(owner, returned.code!, session.verifier);
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({
      installation: { id: installation.id, account: 'acme-corp', target_type: 'Organization' },
    });
    expect(await connection(owner)).toMatchObject({
      status: 'ready',
      user: { login: 'victim-gh' },
      installations: [{ id: installation.id, account: 'acme-corp' }],
    });
    expect(await repositoryNames(owner)).toContain('acme-corp/payroll');
    // Once: the same code again is refused.
    await refused(await redeem(owner, returned.code!, session.verifier), /^body\.code: unknown/);
  });

  it('hands no code when a member only asked the owners to install', async () => {
    const intern = await stack.createUser('acme-intern');
    const session = await startSession(intern);
    expect(await browserInstalls('intern-gh', session.installUrl, 'acme-corp')).toEqual({ outcome: 'requested' });
    await seesNothingOf(intern, 'acme-corp');
  });
});

describe('phishing: an organisation admin completes the attacker’s install session', () => {
  it('sends the code to the admin’s own app, where neither the attacker nor the admin can link with it', async () => {
    // The attacker has a Threadwork account and has never linked anything; she sends her install
    // URL to the admin of globex, who installs the app on globex through it.
    const mallory = await stack.createUser('mallory');
    const victim = await stack.createUser('victim2');
    const session = await startSession(mallory);
    const returned = await browserInstalls('victim2-gh', session.installUrl, 'globex');
    // The code goes to `return_to` in the browser that completed the setup: the admin's device.
    expect(returned.outcome).toBe('installed');

    // The admin's own Threadwork app holds no verifier of that session, and is not its creator.
    await refused(await redeem(victim, returned.code!, pkcePair().verifier), /^body\.code: unknown/);
    // The attacker holds the verifier, but not the code: whatever she presents is unknown.
    await refused(await redeem(mallory, pkcePair().verifier, session.verifier), /^body\.code: unknown/);
    await seesNothingOf(mallory, 'globex');
    await seesNothingOf(victim, 'globex');
    const thread = await post('/v1/threads', mallory, {
      repository_id: fake.repository('globex/secrets').id,
      prompt: 'x',
    });
    expect(thread.status).toBe(404);
  });

  it('is refused at the callback when the attacker is verified as her own GitHub account', async () => {
    const mallory = await stack.createUser('mallory-known');
    await linkInstallation(gh, mallory, 'mallory-gh');
    const session = await startSession(mallory);
    const returned = await browserInstalls('victim3-gh', session.installUrl, 'initech');
    expect(returned).toEqual({
      outcome: 'error',
      error: 'github_account_mismatch',
      installation_id: String(installationOf('initech')!.id),
    });
    await seesNothingOf(mallory, 'initech');
  });

  it('is refused at the callback when the admin is verified for their own account', async () => {
    const victim = await stack.createUser('victim4');
    await linkInstallation(gh, victim, 'victim4-gh');
    const mallory = await stack.createUser('mallory-fresh');
    const session = await startSession(mallory);
    const returned = await browserInstalls('victim4-gh', session.installUrl, 'umbrella');
    expect(returned).toMatchObject({ outcome: 'error', error: 'github_account_mismatch' });
    await seesNothingOf(mallory, 'umbrella');
  });

  it('decides at redemption for good: a GitHub user is verified for one account only', async () => {
    // Two sessions completed by the same fresh GitHub user: the first redemption verifies the
    // redeemer as that user, and the other account's code (had it leaked) no longer links.
    fake.addMember('hooli', 'gavin-gh', 'admin');
    const gavin = await stack.createUser('gavin');
    const mallory = await stack.createUser('mallory-race');
    const stolen = await startSession(mallory);
    const hers = await browserInstalls('gavin-gh', stolen.installUrl, 'hooli');
    const own = await startSession(gavin);
    const his = await browserInstalls('gavin-gh', own.installUrl, 'hooli');
    expect([hers.outcome, his.outcome]).toEqual(['installed', 'installed']);
    expect((await redeem(gavin, his.code!, own.verifier)).status).toBe(201);
    await refused(
      await redeem(mallory, hers.code!, stolen.verifier),
      /^body\.code: the GitHub account that completed the setup is verified for another account/,
    );
    await seesNothingOf(mallory, 'hooli');
  });
});

describe('guessing installation ids', () => {
  it('links nothing for an installation the GitHub user who came back cannot see', async () => {
    const mallory = await stack.createUser('mallory-guess');
    const target = installationOf('acme-corp') ?? fake.install('acme-corp');
    const forge = (state: string, code?: string) => {
      const url = new URL(`${stack.baseUrl}/v1/repohost/setup`);
      url.searchParams.set('installation_id', String(target.id));
      url.searchParams.set('setup_action', 'install');
      url.searchParams.set('state', state);
      if (code !== undefined) url.searchParams.set('code', code);
      return fetch(url, { redirect: 'manual' }).then((res) =>
        Object.fromEntries(new URL(res.headers.get('location')!).searchParams),
      );
    };
    // Her own session and her own OAuth code, the organisation's installation id.
    expect(await forge((await startSession(mallory)).state, fake.oauthCode('mallory-gh'))).toEqual({
      outcome: 'error',
      error: 'not_installation_admin',
      installation_id: String(target.id),
    });
    // No OAuth code at all: nothing proves who came back.
    expect(await forge((await startSession(mallory)).state)).toMatchObject({
      outcome: 'error',
      error: 'unverified_installation',
    });
    // A state that is not a session's.
    expect(await forge('f'.repeat(48), fake.oauthCode('mallory-gh'))).toEqual({
      outcome: 'error',
      error: 'invalid_state',
    });
    // And codes are not guessable either.
    await refused(await redeem(mallory, 'A'.repeat(43), pkcePair().verifier), /^body\.code: unknown/);
    await seesNothingOf(mallory, 'acme-corp');
    expect((await post('/v1/threads', mallory, { repository_id: payroll.id, prompt: 'x' })).status).toBe(404);
  });
});

describe('who may link an installation: whoever administers its account, not whoever sees it', () => {
  // GitHub lists an installation in `GET /user/installations` for anyone who can reach one of its
  // repositories; a link gives all of them, private ones included, to run agents on and push to.
  it('refuses an organisation member who can reach one of its repositories', async () => {
    fake.addMember('vandelay', 'art-gh', 'admin');
    fake.addMember('vandelay', 'george-gh', 'member');
    fake.addRepository('vandelay', 'latex-catalogue', { private: false });
    const ledger = fake.addRepository('vandelay', 'ledger');
    const installation = fake.install('vandelay');
    const george = await stack.createUser('george');
    const session = await startSession(george);
    const returned = await setupCallback(session.state, installation.id, 'george-gh');
    expect(returned).toEqual({
      outcome: 'error',
      error: 'not_installation_admin',
      installation_id: String(installation.id),
    });
    expect(returned.code).toBeUndefined();
    expect((await connection(george)).installations).toEqual([]);
    await seesNothingOf(george, 'vandelay');
    expect((await post('/v1/threads', george, { repository_id: ledger.id, prompt: 'x' })).status).toBe(404);
  });

  it('links the same installation for an admin of the organisation', async () => {
    fake.addMember('kramerica', 'cosmo-gh', 'admin');
    fake.addMember('kramerica', 'bob-sacamano-gh', 'member');
    fake.addRepository('kramerica', 'oil-tanker');
    const installation = fake.install('kramerica');
    // The member first: refused.
    const member = await stack.createUser('bob-sacamano');
    const refusedSession = await startSession(member);
    expect(await setupCallback(refusedSession.state, installation.id, 'bob-sacamano-gh')).toMatchObject({
      outcome: 'error',
      error: 'not_installation_admin',
    });
    // The admin: linked.
    const cosmo = await stack.createUser('cosmo');
    const session = await startSession(cosmo);
    const returned = await setupCallback(session.state, installation.id, 'cosmo-gh');
    expect(returned.outcome).toBe('installed');
    expect((await redeem(cosmo, returned.code!, session.verifier)).status).toBe(201);
    expect(await connection(cosmo)).toMatchObject({
      status: 'ready',
      user: { login: 'cosmo-gh' },
      installations: [{ id: installation.id, account: 'kramerica' }],
    });
    expect(await repositoryNames(cosmo)).toContain('kramerica/oil-tanker');
    await seesNothingOf(member, 'kramerica');
  });

  it('links nothing when GitHub does not answer who administers the organisation', async () => {
    fake.addMember('pendleton', 'lippman-gh', 'admin');
    fake.addRepository('pendleton', 'manuscripts');
    const installation = fake.install('pendleton');
    const lippman = await stack.createUser('lippman');
    fake.failNext('GET', /^\/user\/memberships\/orgs\/pendleton$/, { status: 502, message: 'Server Error' });
    expect(await setupCallback((await startSession(lippman)).state, installation.id, 'lippman-gh')).toEqual({
      outcome: 'error',
      error: 'github_unavailable',
      installation_id: String(installation.id),
    });
    fake.failNext('GET', /^\/user\/memberships\/orgs\/pendleton$/, { status: 403, message: 'Forbidden' });
    expect(await setupCallback((await startSession(lippman)).state, installation.id, 'lippman-gh')).toMatchObject({
      outcome: 'error',
      error: 'unverified_installation',
    });
    await seesNothingOf(lippman, 'pendleton');
  });

  it('links a personal installation for its owner, and for no one else', async () => {
    fake.addRepository('elaine-gh', 'pendant-publishing');
    const installation = fake.install('elaine-gh');
    fake.account('puddy-gh');
    const puddy = await stack.createUser('puddy');
    const guessed = await startSession(puddy);
    expect(await setupCallback(guessed.state, installation.id, 'puddy-gh')).toMatchObject({
      outcome: 'error',
      error: 'not_installation_admin',
    });
    const elaine = await stack.createUser('elaine');
    const session = await startSession(elaine);
    const returned = await setupCallback(session.state, installation.id, 'elaine-gh');
    expect(returned.outcome).toBe('installed');
    expect((await redeem(elaine, returned.code!, session.verifier)).status).toBe(201);
    expect(await repositoryNames(elaine)).toContain('elaine-gh/pendant-publishing');
    await seesNothingOf(puddy, 'elaine-gh');
  });
});
