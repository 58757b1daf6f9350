import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rpc } from '@threadwork/contracts';
import { request, withRequestId, type AppError } from '@threadwork/platform';
import { newClaimId } from '@threadwork/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { alice, bob, gitClone, useGitHubProvider } from './support/github.js';

describe('repohost GitHub App provider', () => {
  const gh = useGitHubProvider();
  const { heldRun } = gh;

  let aliceInstallation: number;
  beforeAll(async () => {
    aliceInstallation = await gh.connectAlice();
  });

  it('lists the installation repositories merged with local ones, and grants access and tokens', async () => {
    const { repositories } = await request(gh.nc, rpc.repohost.repositories, { owner_id: alice });
    expect(repositories.map((r) => r.full_name)).toEqual(['alice-gh/gadgets', 'alice-gh/widgets', 'local/local-only']);
    const listed = repositories.find((r) => r.repository_id === gh.widgets.id)!;
    expect(listed).toEqual({
      repository_id: gh.widgets.id,
      installation_id: aliceInstallation,
      owner: 'alice-gh',
      name: 'widgets',
      full_name: 'alice-gh/widgets',
      url: gh.fake.cloneUrl('alice-gh/widgets'),
      avatar_url: gh.fake.accounts.get('alice-gh')!.avatar_url,
      private: true,
      default_branch: 'trunk',
    });
    expect((await request(gh.nc, rpc.repohost.repositories, { owner_id: alice, q: 'WIDG' })).repositories).toHaveLength(
      1,
    );
    expect(
      (await request(gh.nc, rpc.repohost.repositories, { owner_id: bob })).repositories.map((r) => r.full_name),
    ).toEqual(['local/local-only']);

    const access = await request(gh.nc, rpc.repohost.access, {
      owner_id: alice,
      repository_ids: [gh.gadgets.id, gh.widgets.id],
    });
    expect(access.repositories.map((r) => r.name)).toEqual(['gadgets', 'widgets']);

    const held = await heldRun(alice, [gh.widgets]);
    // Whoever may read the caller's inboxes (every runner, for a runner) hears the reply sealed.
    const heard: string[] = [];
    const tap = gh.nc.subscribe('_INBOX.>', {
      callback: (_err, msg) => {
        heard.push(Buffer.from(msg.data).toString('latin1'));
      },
    });
    await gh.nc.flush();
    const { token, expires_at } = await request(gh.nc, rpc.repohost.token, {
      ...held,
      repository_ids: [gh.widgets.id],
    });
    await gh.nc.flush();
    tap.unsubscribe();
    expect(token).toMatch(/^ghs_/);
    expect(heard.length).toBeGreaterThan(0);
    expect(heard.join('\n')).not.toContain(token!);
    expect(Date.parse(expires_at!) - Date.now()).toBeGreaterThan(30 * 60_000);
    // A second ask reuses the token while it has long enough to live.
    const again = await request(gh.nc, rpc.repohost.token, { ...held, repository_ids: [gh.widgets.id] });
    expect(again.token).toBe(token);

    // The token clones the repository it was asked for, and only that one.
    const work = mkdtempSync(join(tmpdir(), 'threadwork-clone-'));
    try {
      const url = new URL(gh.fake.cloneUrl('alice-gh/widgets'));
      url.username = 'x-access-token';
      url.password = token!;
      await gitClone(url.href, join(work, 'w'));
      const other = new URL(gh.fake.cloneUrl('alice-gh/gadgets'));
      other.username = 'x-access-token';
      other.password = token!;
      await expect(gitClone(other.href, join(work, 'g'))).rejects.toThrow();
    } finally {
      rmSync(work, { recursive: true, force: true });
    }

    const local = (await request(gh.nc, rpc.repohost.repositories, { owner_id: alice, q: 'local-only' }))
      .repositories[0]!;
    const localRepo = { id: local.repository_id, full_name: local.full_name };
    const heldLocal = await heldRun(alice, [localRepo]);
    const none = await request(gh.nc, rpc.repohost.token, { ...heldLocal, repository_ids: [local.repository_id] });
    expect(none).toEqual({ token: null, expires_at: null });
    const heldBoth = await heldRun(alice, [gh.widgets, localRepo]);
    const mixed = await request(gh.nc, rpc.repohost.token, {
      ...heldBoth,
      repository_ids: [gh.widgets.id, local.repository_id],
    }).catch((e: unknown) => e);
    expect((mixed as AppError).code).toBe('invalid_request');
    // A run of Bob's naming Alice's repository gets nothing: Bob does not see it.
    const heldByBob = await heldRun(bob, [gh.widgets]);
    const foreign = await request(gh.nc, rpc.repohost.token, { ...heldByBob, repository_ids: [gh.widgets.id] }).catch(
      (e: unknown) => e,
    );
    expect((foreign as AppError).code).toBe('not_found');

    // Every app call so far (installations, tokens) went out with one cached JWT.
    expect(gh.fake.jwtsSeen.size).toBe(1);
  });

  it('hands a token only to the runner holding a live run, for that run’s repositories', async () => {
    const held = await heldRun(alice, [gh.widgets]);
    const refusal = async (req: { run_id: string; claim_id: string; repository_ids: number[] }) => {
      const err = await request(gh.nc, rpc.repohost.token, req).then(
        () => null,
        (e: unknown) => e as AppError,
      );
      return err?.code;
    };
    // A claim id that never held the run: whoever names a run does not get its repositories.
    const stranger = { run_id: held.run_id, claim_id: newClaimId(), repository_ids: [gh.widgets.id] };
    expect(await refusal(stranger)).toBe('already_settled');
    // The holder, for a repository of the owner's that is not the run's.
    expect(await refusal({ ...held, repository_ids: [gh.gadgets.id] })).toBe('invalid_request');
    const missing = { run_id: 'run_missing', claim_id: held.claim_id, repository_ids: [gh.widgets.id] };
    expect(await refusal(missing)).toBe('not_found');
    // Once a newer attempt claims the run (its runner handed it back), the older claim gets nothing more.
    await request(gh.nc, rpc.runs.release, { run_id: held.run_id, attempt: 0, claim_id: held.claim_id });
    await request(gh.nc, rpc.runs.claim, { run_id: held.run_id, runner_id: 'runner-next', claim_id: newClaimId() });
    expect(await refusal({ ...held, repository_ids: [gh.widgets.id] })).toBe('already_settled');
  });

  it('answers GitHub’s failures with a code and a message of its own, and logs GitHub’s text under the request id', async () => {
    // GitHub's messages can echo what the request carried; this one stands for such an echo.
    const echo = 'Branch <threadwork/evil> of repository secret-plans does not exist';
    const held = await heldRun(alice, [gh.gadgets]);
    const ask = (requestId: string) =>
      withRequestId(requestId, () =>
        request(gh.nc, rpc.repohost.token, { ...held, repository_ids: [gh.gadgets.id] }).then(
          () => null,
          (e: unknown) => e as AppError,
        ),
      );

    gh.fake.failNext('POST', /^\/app\/installations\/\d+\/access_tokens$/, {
      status: 422,
      message: echo,
      extra: { errors: [{ resource: 'Branch', code: 'invalid', message: echo }] },
    });
    const refused = await ask('req-github-refused');
    expect(refused).toMatchObject({ code: 'internal', message: 'GitHub refused the request', retryable: false });
    expect(JSON.stringify(refused?.toJSON())).not.toContain('secret-plans');

    gh.fake.failNext('POST', /^\/app\/installations\/\d+\/access_tokens$/, { status: 502, message: echo });
    const down = await ask('req-github-down');
    expect(down).toMatchObject({ code: 'unavailable', message: 'GitHub did not answer; retry later', retryable: true });
    expect(JSON.stringify(down?.toJSON())).not.toContain('secret-plans');

    // The operator finds GitHub's own words by the request's id.
    for (const [requestId, status] of [
      ['req-github-refused', 422],
      ['req-github-down', 502],
    ] as const) {
      const line = gh.logLines
        .map((l) => JSON.parse(l) as { request_id?: string; github?: { status: number; message?: string } })
        .find((l) => l.request_id === requestId && l.github);
      expect(line?.github?.status, requestId).toBe(status);
      expect(line?.github?.message, requestId).toContain('secret-plans');
    }
  });
});
