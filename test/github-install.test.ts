import { ProviderConnection, RepositoryList, ThreadWithRun } from '@threadwork/contracts';
import { pkcePair } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import { installInBrowser, linkInstallation } from './support/github.js';
import { json } from './support/http.js';
import {
  alice,
  bob,
  fake,
  gh,
  post,
  RETURN_TO,
  SECRET,
  SLUG,
  stack,
  useGitHubStack,
  widgets,
} from './support/github-e2e.js';

// The GitHub App end to end: linking an installation, GitHub failing, and webhooks.

useGitHubStack();

describe('install flow', () => {
  it('refuses a return_to other than the app, and a session without a code challenge', async () => {
    const { challenge } = pkcePair();
    const res = await post('/v1/repohost/install-session', alice, {
      return_to: 'https://example.com/setup',
      code_challenge: challenge,
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 'invalid_request' } });
    expect((await stack.fetch('/v1/repohost/install-session', { method: 'POST', body: '{}' })).status).toBe(401);
    // A client of the older form (no challenge) is told what is missing.
    const old = await post('/v1/repohost/install-session', alice, { return_to: RETURN_TO });
    expect(old.status).toBe(400);
    expect(await old.json()).toEqual({
      error: {
        code: 'invalid_request',
        message:
          'body.code_challenge: required: base64url(SHA-256(code_verifier)), 43 characters, as in PKCE (RFC 7636, S256)',
      },
    });
  });

  it('links an installation, shows it, lists its repositories and creates a thread on one', async () => {
    const before = await json(await stack.fetch('/v1/repohost/connection', { user: alice }), 200, ProviderConnection);
    expect(before).toMatchObject({ status: 'not_connected', app_slug: SLUG, installations: [] });

    const pkce = pkcePair();
    const session = await json<{ install_url: string; expires_at: string }>(
      await post('/v1/repohost/install-session', alice, { return_to: RETURN_TO, code_challenge: pkce.challenge }),
      201,
    );
    // The browser, back at the app's return_to through the gateway's setup callback.
    const { setupUrl, returned } = await installInBrowser(gh, 'alice-gh', session.install_url);
    const installationId = [...fake.installations.values()].find((i) => i.account.login === 'alice-gh')!.id;
    expect(returned).toEqual({
      outcome: 'installed',
      installation_id: String(installationId),
      code: expect.any(String),
    });
    // Nothing is linked until the app redeems the code with its verifier.
    expect(
      (await json(await stack.fetch('/v1/repohost/connection', { user: alice }), 200, ProviderConnection)).status,
    ).toBe('not_connected');
    const linked = await json<{ installation: { id: number; account: string } }>(
      await post('/v1/repohost/installations', alice, {
        code: returned.code,
        code_verifier: pkce.verifier,
      }),
      201,
    );
    expect(linked.installation).toMatchObject({ id: installationId, account: 'alice-gh' });

    // The same callback again (a replay, a double click): the state is spent, nothing changes.
    const replay = await fetch(setupUrl, { redirect: 'manual' });
    expect(replay.status).toBe(302);
    expect(Object.fromEntries(new URL(replay.headers.get('location')!).searchParams)).toMatchObject({
      outcome: 'error',
      error: 'invalid_state',
    });

    const connection = await json(
      await stack.fetch('/v1/repohost/connection', { user: alice }),
      200,
      ProviderConnection,
    );
    expect(connection).toMatchObject({
      status: 'ready',
      user: { login: 'alice-gh', id: fake.accounts.get('alice-gh')!.id },
      installations: [
        {
          id: installationId,
          account: 'alice-gh',
          target_type: 'User',
          repository_selection: 'all',
          suspended: false,
          manage_url: `${fake.webUrl}/settings/installations/${installationId}`,
        },
      ],
      installation_requests: [],
    });

    const listed = await json(
      await stack.fetch('/v1/repohost/repositories?q=widg', { user: alice }),
      200,
      RepositoryList,
    );
    expect(listed.repositories).toEqual([
      expect.objectContaining({ repository_id: widgets.id, full_name: 'alice-gh/widgets', default_branch: 'trunk' }),
    ]);
    const bobs = await json(await stack.fetch('/v1/repohost/repositories', { user: bob }), 200, RepositoryList);
    expect(bobs.repositories).toEqual([]);
    // Bob cannot start a thread on alice's repository: it is not his to see.
    expect((await post('/v1/threads', bob, { repository_id: widgets.id, prompt: 'hi' })).status).toBe(404);

    const thread = await json(
      await post('/v1/threads', alice, { repository_id: widgets.id, prompt: 'Add a changelog' }),
      202,
      ThreadWithRun,
    );
    expect(thread.repohost_url).toBe(fake.cloneUrl('alice-gh/widgets'));
  });

  it("does not link another user's installation through a session of one's own", async () => {
    fake.install('bob-gh', { createdAt: new Date(Date.now() - 60 * 60_000) });
    const session = await json<{ install_url: string }>(
      await post('/v1/repohost/install-session', alice, { return_to: RETURN_TO, code_challenge: pkcePair().challenge }),
      201,
    );
    const state = new URL(session.install_url).searchParams.get('state')!;
    const bobInstallation = [...fake.installations.values()].find((i) => i.account.login === 'bob-gh')!;
    // Alice signs in as herself (her OAuth code) but names bob's installation.
    const forged = new URL(`${stack.baseUrl}/v1/repohost/setup`);
    forged.searchParams.set('installation_id', String(bobInstallation.id));
    forged.searchParams.set('setup_action', 'install');
    forged.searchParams.set('state', state);
    forged.searchParams.set('code', fake.oauthCode('alice-gh'));
    const res = await fetch(forged, { redirect: 'manual' });
    expect(Object.fromEntries(new URL(res.headers.get('location')!).searchParams)).toMatchObject({
      outcome: 'error',
      error: 'not_installation_admin',
    });
    const connection = await json(
      await stack.fetch('/v1/repohost/connection', { user: alice }),
      200,
      ProviderConnection,
    );
    expect(connection.installations.map((i) => i.account)).toEqual(['alice-gh']);
    const listed = await json(
      await stack.fetch('/v1/repohost/repositories?q=bobs', { user: alice }),
      200,
      RepositoryList,
    );
    expect(listed.repositories).toEqual([]);
  });
});

describe('GitHub failing', () => {
  it('reaches the client as a code and a message of ours, never GitHub’s text, with the request id to quote', async () => {
    // A user whose installation's repositories were never read: a failure cannot fall back on a cached list.
    fake.addRepository('carol-gh', 'plans');
    const carol = await stack.createUser('gh-carol');
    await linkInstallation(gh, carol, 'carol-gh');

    // GitHub's message may echo what the request carried.
    const echo = 'Resource not accessible by integration: carol-gh/plans?token=hunter2';
    fake.failNext('GET', /^\/installation\/repositories$/, { status: 403, message: echo });
    const refused = await stack.fetch('/v1/repohost/repositories', { user: carol });
    const refusedText = await refused.text();
    expect(refused.status).toBe(500);
    expect(JSON.parse(refusedText)).toEqual({ error: { code: 'internal', message: 'internal error' } });
    expect(refused.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);

    fake.failNext('GET', /^\/installation\/repositories$/, { status: 502, message: echo });
    const down = await stack.fetch('/v1/repohost/repositories', { user: carol });
    const downText = await down.text();
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('1');
    expect(JSON.parse(downText)).toEqual({
      error: { code: 'unavailable', message: 'GitHub did not answer; retry later' },
    });
    for (const text of [refusedText, downText]) {
      expect(text).not.toContain('hunter2');
      expect(text).not.toContain('plans');
      expect(text).not.toMatch(/GitHub answered|403|502/);
    }

    // And once GitHub answers again, the list is there.
    const listed = await json(await stack.fetch('/v1/repohost/repositories', { user: carol }), 200, RepositoryList);
    expect(listed.repositories.map((r) => r.full_name)).toEqual(['carol-gh/plans']);
  });
});

describe('webhooks', () => {
  it('answers 202 to a signed delivery, once, and 401 to a bad or missing signature', async () => {
    const payload = fake.payloads.repository('edited', widgets.id);
    const first = await fake.sendWebhook('repository', payload, { delivery: 'e2e-delivery-1' });
    expect(first).toMatchObject({ status: 202 });
    expect(JSON.parse(first.body)).toEqual({ status: 'accepted' });
    const replay = await fake.sendWebhook('repository', payload, { delivery: 'e2e-delivery-1' });
    expect(replay.status).toBe(202);
    expect(JSON.parse(replay.body)).toEqual({ status: 'duplicate' });
    for (const signature of ['bad', 'missing'] as const) {
      const refused = await fake.sendWebhook('repository', payload, { signature });
      expect(refused.status).toBe(401);
      expect(JSON.parse(refused.body)).toEqual({ error: 'Unauthorized' });
    }
    // A form-encoded delivery is verified over its raw bytes too.
    const form = `payload=${encodeURIComponent(JSON.stringify(payload))}`;
    const { createHmac } = await import('node:crypto');
    const res = await fetch(fake.webhookUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-github-event': 'repository',
        'x-github-delivery': 'e2e-form-1',
        'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(form).digest('hex')}`,
      },
      body: form,
    });
    expect(res.status).toBe(202);
  });

  it('refuses, with 413, a delivery too large to forward over NATS', async () => {
    const payload = { ...fake.payloads.repository('edited', widgets.id), padding: 'x'.repeat(2 * 1024 * 1024) };
    const res = await fake.sendWebhook('repository', payload, { delivery: 'e2e-huge-1', offSpec: true });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'payload_too_large' } });
  });
});
