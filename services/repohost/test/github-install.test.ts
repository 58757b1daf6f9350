import { createHash } from 'node:crypto';
import { ProviderConnection, rpc } from '@threadwork/contracts';
import { AppError, request, serviceDbName } from '@threadwork/platform';
import { pkcePair } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import {
  CONSOLE_RETURN_TO,
  PUBLIC_BASE_URL,
  RETURN_TO,
  SCHEME,
  SLUG,
  alice,
  bob,
  outcome,
  refusal,
  useGitHubProvider,
} from './support/github.js';

describe('repohost GitHub App provider', () => {
  const gh = useGitHubProvider();
  const { installAs, startSession, link, installFor } = gh;

  let aliceInstallation: number;

  it('refuses an install session that would return anywhere but the app or the console’s setup page', async () => {
    const { challenge } = pkcePair();
    for (const return_to of [
      'https://evil.example/cb',
      `${SCHEME}://repohost/setup?x=1`,
      'other://repohost/setup',
      // The console's page on another origin, or another page, or the page with anything added.
      'https://evil.example/settings/github',
      'http://threadwork.test/settings/github',
      'https://threadwork.test:8443/settings/github',
      'https://threadwork.test.evil.example/settings/github',
      'https://user@threadwork.test/settings/github',
      `${PUBLIC_BASE_URL}/settings`,
      `${PUBLIC_BASE_URL}/settings/github/`,
      `${PUBLIC_BASE_URL}/settings/github?next=https://evil.example`,
      `${PUBLIC_BASE_URL}/settings/github#x`,
      `${PUBLIC_BASE_URL}/settings/GitHub`,
      `${PUBLIC_BASE_URL}//settings/github`,
      `${PUBLIC_BASE_URL}/x/../settings/github`,
    ]) {
      const err = await request(gh.nc, rpc.repohost.installSession, {
        owner_id: alice,
        return_to,
        code_challenge: challenge,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe('invalid_request');
    }
  });

  it('returns an install session to the console’s setup page, on the gateway’s own origin', async () => {
    gh.fake.account('dora-gh');
    const session = await startSession('usr_dora', CONSOLE_RETURN_TO);
    const callback = await installAs('dora-gh', session.install_url);
    const { redirect_to } = await request(gh.nc, rpc.repohost.setup, callback);
    expect(outcome(redirect_to)).toEqual({
      base: CONSOLE_RETURN_TO,
      outcome: 'installed',
      installation_id: String(callback.installation_id),
      code: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
  });

  it('reports not_connected before anything is linked, with the local folder beside it', async () => {
    const connection = ProviderConnection.parse(await request(gh.nc, rpc.repohost.connection, { owner_id: alice }));
    expect(connection.status).toBe('not_connected');
    expect(connection.app_slug).toBe(SLUG);
    expect(connection.install_url).toBe(`${gh.fake.webUrl}/apps/${SLUG}/installations/new`);
    expect(connection.installations.map((i) => i.account)).toEqual(['local']);
  });

  it('links an installation through session → install page → setup callback → code redeemed', async () => {
    const session = await startSession(alice);
    expect(new URL(session.install_url).pathname).toBe(`/apps/${SLUG}/installations/new`);
    expect(Date.parse(session.expires_at) - Date.now()).toBeGreaterThan(9 * 60_000);

    const callback = await installAs('alice-gh', session.install_url);
    expect(callback.setup_action).toBe('install');
    const { redirect_to } = await request(gh.nc, rpc.repohost.setup, callback);
    const returned = outcome(redirect_to);
    expect(returned).toEqual({
      base: RETURN_TO,
      outcome: 'installed',
      installation_id: String(callback.installation_id),
      code: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    aliceInstallation = callback.installation_id;
    // The callback linked nothing by itself.
    expect(ProviderConnection.parse(await request(gh.nc, rpc.repohost.connection, { owner_id: alice })).status).toBe(
      'not_connected',
    );
    const linked = await request(gh.nc, rpc.repohost.link, {
      owner_id: alice,
      code: returned.code!,
      code_verifier: session.verifier,
    });
    expect(linked.installation).toMatchObject({ id: aliceInstallation, account: 'alice-gh' });

    const connection = ProviderConnection.parse(await request(gh.nc, rpc.repohost.connection, { owner_id: alice }));
    expect(connection.status).toBe('ready');
    expect(connection.installations).toEqual([
      {
        id: aliceInstallation,
        account: 'alice-gh',
        avatar_url: gh.fake.accounts.get('alice-gh')!.avatar_url,
        target_type: 'User',
        repository_selection: 'all',
        suspended: false,
        manage_url: `${gh.fake.webUrl}/settings/installations/${aliceInstallation}`,
      },
      expect.objectContaining({ account: 'local' }),
    ]);
  });

  it('takes a state once: a second use, an unknown one and an expired one link nothing', async () => {
    const session = await startSession(bob);
    const callback = await installAs('bob-gh-not-yet', session.install_url).catch(() => null);
    expect(callback).toBeNull(); // no such GitHub user: the page refuses

    gh.fake.account('bob-gh');
    const bobCallback = await installAs('bob-gh', session.install_url);
    const [first, second] = await Promise.all([
      request(gh.nc, rpc.repohost.setup, bobCallback),
      request(gh.nc, rpc.repohost.setup, bobCallback),
    ]);
    const outcomes = [outcome(first.redirect_to).outcome, outcome(second.redirect_to).outcome].sort();
    expect(outcomes).toEqual(['error', 'installed']);
    const third = await request(gh.nc, rpc.repohost.setup, bobCallback);
    expect(outcome(third.redirect_to)).toEqual({ base: RETURN_TO, outcome: 'error', error: 'invalid_state' });

    const unknown = await request(gh.nc, rpc.repohost.setup, { ...bobCallback, state: 'f'.repeat(48) });
    expect(outcome(unknown.redirect_to)).toMatchObject({ outcome: 'error', error: 'invalid_state' });

    // An expired session: its expiry is moved into the past in repohost's own database.
    const { state } = await startSession(alice);
    await gh.mongo
      .db(serviceDbName(gh.dbPrefix, 'repohost'))
      .collection<{ _id: string; expires_at: Date }>('install_sessions')
      .updateOne({ _id: state }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    const late = await request(gh.nc, rpc.repohost.setup, {
      installation_id: aliceInstallation,
      setup_action: 'install',
      state,
    });
    expect(outcome(late.redirect_to)).toMatchObject({ outcome: 'error', error: 'invalid_state' });
  });

  it('redeems a code once, for the owner of its session, with its verifier only', async () => {
    gh.fake.account('dave-gh');
    const dave = 'usr_dave';
    const { installationId, code, verifier } = await installFor(dave, 'dave-gh');

    // Another caller, even with the verifier, is told nothing about it; the owner needs the verifier.
    expect(await refusal(link('usr_mallory', code, verifier))).toMatch(/^invalid_request: body\.code: unknown/);
    expect(await refusal(link(dave, code, pkcePair().verifier))).toMatch(/^invalid_request: body\.code_verifier: /);
    expect(await refusal(link(dave, 'x'.repeat(43), verifier))).toMatch(/^invalid_request: body\.code: unknown/);
    expect((await request(gh.nc, rpc.repohost.connection, { owner_id: dave })).status).toBe('not_connected');

    // None of that spent it; of concurrent redemptions exactly one links.
    const results = await Promise.all([1, 2, 3].map(() => refusal(link(dave, code, verifier))));
    expect(results.filter((r) => r === null)).toHaveLength(1);
    expect(results.filter((r) => r?.startsWith('invalid_request: body.code: unknown'))).toHaveLength(2);
    const connection = await request(gh.nc, rpc.repohost.connection, { owner_id: dave });
    expect(connection.installations.map((i) => i.id)).toEqual([installationId, 1]);
    expect(await refusal(link(dave, code, verifier))).toMatch(/^invalid_request: body\.code: unknown/);

    // A code past its lifetime: its expiry is moved into the past in repohost's own database.
    const late = await installFor(dave, 'dave-gh');
    const hash = createHash('sha256').update(late.code).digest('hex');
    await gh.mongo
      .db(serviceDbName(gh.dbPrefix, 'repohost'))
      .collection<{ _id: string; expires_at: Date }>('install_link_codes')
      .updateOne({ _id: hash }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expect(await refusal(link(dave, late.code, late.verifier))).toMatch(/^invalid_request: body\.code: unknown/);
  });

  it('without OAuth, links a guessed fresh installation someone else linked to no one else', async () => {
    gh.fake.account('erin-gh');
    const erin = await installFor('usr_erin', 'erin-gh');
    await link('usr_erin', erin.code, erin.verifier);
    // Mallory's own session, a setup callback she forges with erin's id: created a moment ago, so
    // it passes the creation-time check, and the code comes back to mallory's own browser...
    const session = await startSession('usr_mallory');
    const { redirect_to } = await request(gh.nc, rpc.repohost.setup, {
      installation_id: erin.installationId,
      setup_action: 'install',
      state: session.state,
    });
    const returned = outcome(redirect_to);
    expect(returned).toMatchObject({ outcome: 'installed' });
    // ...but without OAuth an installation is linked to one owner only.
    expect(await refusal(link('usr_mallory', returned.code!, session.verifier))).toMatch(
      /^invalid_request: body\.code: this installation is linked to another account/,
    );
    expect((await request(gh.nc, rpc.repohost.connection, { owner_id: 'usr_mallory' })).status).toBe('not_connected');
    // Erin links it again as often as she likes.
    const again = await installFor('usr_erin', 'erin-gh');
    expect((await link('usr_erin', again.code, again.verifier)).installation.id).toBe(erin.installationId);
  });

  it("never links someone else's older installation, and keeps it invisible", async () => {
    const carolInstallation = [...gh.fake.installations.values()].find((i) => i.account.login === 'carol-gh')!;
    const { state } = await startSession('usr_mallory');
    const { redirect_to } = await request(gh.nc, rpc.repohost.setup, {
      installation_id: carolInstallation.id,
      setup_action: 'install',
      state,
    });
    expect(outcome(redirect_to)).toMatchObject({ outcome: 'error', error: 'unverified_installation' });

    const connection = await request(gh.nc, rpc.repohost.connection, { owner_id: 'usr_mallory' });
    expect(connection.status).toBe('not_connected');
    const { repositories } = await request(gh.nc, rpc.repohost.repositories, { owner_id: 'usr_mallory' });
    expect(repositories.map((r) => r.full_name)).toEqual(['local/local-only']);
    const err = await request(gh.nc, rpc.repohost.access, {
      owner_id: 'usr_mallory',
      repository_ids: [gh.secretStuff.id],
    }).catch((e: unknown) => e);
    expect((err as AppError).code).toBe('not_found');
    const missing = await request(gh.nc, rpc.repohost.setup, { setup_action: 'install', state: 'nope' });
    expect(outcome(missing.redirect_to)).toMatchObject({ outcome: 'error', error: 'invalid_state' });
  });
});
