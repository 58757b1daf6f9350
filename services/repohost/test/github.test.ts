import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DiscardPolicy } from '@nats-io/jetstream';
import {
  DOMAIN_STREAM,
  ProviderConnection,
  Publication,
  domainEvents,
  rpc,
  type CandidateProducedEvent,
} from '@threadwork/contracts';
import {
  AppError,
  connectMongo,
  connectNats,
  createLogger,
  domainEventDigest,
  encodeJson,
  jetStreamOf,
  loadConfig,
  publishJson,
  request,
  serviceDbName,
  type JetStreamHandles,
  type MongoClient,
  type NatsConnection,
  type StartedService,
  withRequestId,
} from '@threadwork/platform';
import {
  baseServiceEnv,
  candidateProduced,
  createBareRepo,
  isolatedNats,
  newClaimId,
  pkcePair,
  pushAsRunner,
  signWebhook,
  startGitHubApp,
  uniqueDbPrefix,
  uniqueId,
  waitFor,
  type FakeGitHub,
  type FakeRepository,
  type IsolatedNats,
} from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunsConfig, startRuns } from '@threadwork/runs';
import { REPOHOST_CONSUMER, RepohostConfig, startRepohost } from '../src/index.js';

const APP_ID = 4242;
const SLUG = 'threadwork-test';
const SECRET = 'webhook-secret-for-tests';
const SCHEME = 'twtest';
const RETURN_TO = `${SCHEME}://repohost/setup`;

// Asynchronous on purpose: the fake GitHub answers git from this very process.
const run = promisify(execFile);
const gitClone = (url: string, dir: string) =>
  run('git', ['clone', '--quiet', url, dir], { env: { ...process.env, GIT_TERMINAL_PROMPT: '0' } });

describe('repohost GitHub App provider', () => {
  let nats: IsolatedNats;
  let nc: NatsConnection;
  let jetstream: JetStreamHandles;
  let mongo: MongoClient;
  let fake: FakeGitHub;
  let service: StartedService;
  let runs: StartedService;
  let localDir: string;
  let dbPrefix: string;
  let widgets: FakeRepository;
  let gadgets: FakeRepository;
  let secretStuff: FakeRepository;

  const alice = 'usr_alice';
  const bob = 'usr_bob';
  /** Repohost's log lines (warnings and worse). */
  const logLines: string[] = [];

  beforeAll(async () => {
    const app = await startGitHubApp({ appId: APP_ID, slug: SLUG, webhookSecret: SECRET, scheme: SCHEME });
    fake = app.fake;
    widgets = fake.addRepository('alice-gh', 'widgets', { branch: 'trunk' });
    gadgets = fake.addRepository('alice-gh', 'gadgets');
    secretStuff = fake.addRepository('carol-gh', 'secret-stuff');
    // Carol installed long ago: her installation id must not be linkable by a session of ours.
    fake.install('carol-gh', { createdAt: new Date(Date.now() - 24 * 60 * 60 * 1000) });

    localDir = mkdtempSync(join(tmpdir(), 'threadwork-repohost-gh-'));
    createBareRepo(localDir, 'local-only');
    nats = await isolatedNats();
    // Tokens go to the runner holding a live run: the runs service says which run a claim holds.
    dbPrefix = uniqueDbPrefix();
    runs = await startRuns(loadConfig(RunsConfig, baseServiceEnv(nats.env('runs'), dbPrefix)));
    service = await startRepohost(
      loadConfig(RepohostConfig, {
        ...baseServiceEnv(nats.env('repohost'), dbPrefix),
        REPOHOST_LOCAL_DIR: localDir,
        ...app.env,
        // One line with `\n`, as in an env file.
        GITHUB_APP_PRIVATE_KEY: app.env.GITHUB_APP_PRIVATE_KEY!.replace(/\n/g, '\\n'),
        // Only webhooks move publications in this file.
        PUBLICATION_SYNC_MS: String(60 * 60_000),
      }),
      // Its warnings, read by the test of GitHub's failures.
      {
        logger: createLogger({
          service: 'repohost',
          level: 'warn',
          destination: { write: (line) => logLines.push(line) },
        }),
      },
    );
    nc = await connectNats({
      servers: nats.url,
      auth: nats.testAuth,
      name: 'repohost-gh-test',
      logger: createLogger({ service: 'test', level: 'silent' }),
    });
    jetstream = await jetStreamOf(nc);
    mongo = await connectMongo({ url: baseServiceEnv(nats.env('repohost')).MONGO_URL!, appName: 'repohost-gh-test' });
  });

  afterAll(async () => {
    await nc?.drain();
    await service?.stop();
    await runs?.stop();
    await mongo?.close();
    await nats?.stop();
    await fake?.close();
    rmSync(localDir, { recursive: true, force: true });
  });

  /**
   * A live run of `owner` on `repositories`, claimed as a runner claims it: what a token is asked
   * for, and what attests the run's DOMAIN events. `thread` and `prr` (its project repository ids)
   * give a thread's next run.
   */
  async function heldRun(
    owner: string,
    repositories: Pick<FakeRepository, 'id' | 'full_name'>[],
    thread = { id: uniqueId('thr_'), prr: repositories.map(() => uniqueId('prp_')) },
  ) {
    const { run } = await request(nc, rpc.runs.admit, {
      owner_id: owner,
      thread_id: thread.id,
      project_id: uniqueId('prj_'),
      message_id: uniqueId('msg_'),
      admission_key: uniqueId('adm_'),
      prompt: 'Push the branch',
      repositories: repositories.map((r, i) => ({
        project_repository_id: thread.prr[i]!,
        repository_id: r.id,
        full_name: r.full_name,
        branch: 'trunk',
        // Where the runner would clone from; the runs service only keeps it.
        clone_url: `https://github.invalid/${r.full_name}.git`,
      })),
    });
    const claimId = newClaimId();
    await request(nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-test', claim_id: claimId });
    return { run_id: run.id, claim_id: claimId, thread };
  }

  /** Publishes a candidate as the runner does: attested by the holder of its run first (unless `forged`). */
  async function publishCandidate(
    held: { run_id: string; claim_id: string } | null,
    event: CandidateProducedEvent,
    msgId: string,
  ) {
    const subject = domainEvents.candidateProduced.subject;
    if (held) {
      const digest = domainEventDigest(encodeJson(event));
      await request(nc, rpc.runs.attest, { run_id: held.run_id, attempt: 0, claim_id: held.claim_id, subject, digest });
    }
    await publishJson(jetstream.js, subject, event, { msgId });
  }

  /** The browser's part: open the install URL as `login`, land on the setup URL GitHub redirects to. */
  async function installAs(login: string, installUrl: string) {
    const res = await fetch(installUrl, { headers: { 'x-fake-login': login }, redirect: 'manual' });
    expect(res.status).toBe(302);
    const setup = new URL(res.headers.get('location')!);
    return {
      installation_id: Number(setup.searchParams.get('installation_id')),
      setup_action: setup.searchParams.get('setup_action') ?? undefined,
      state: setup.searchParams.get('state')!,
    };
  }

  const outcome = (redirect: string): Record<string, string> => {
    const url = new URL(redirect);
    return { base: `${url.protocol}//${url.host}${url.pathname}`, ...Object.fromEntries(url.searchParams) };
  };

  /** An install session of `owner`'s, with the PKCE verifier its client keeps. */
  async function startSession(owner: string) {
    const pkce = pkcePair();
    const session = await request(nc, rpc.repohost.installSession, {
      owner_id: owner,
      return_to: RETURN_TO,
      code_challenge: pkce.challenge,
    });
    return { ...session, state: new URL(session.install_url).searchParams.get('state')!, verifier: pkce.verifier };
  }

  const link = (owner: string, code: string, verifier: string) =>
    request(nc, rpc.repohost.link, { owner_id: owner, code, code_verifier: verifier });

  /** Session, install page as `login`, setup callback: the one-time code and the verifier that redeems it. */
  async function installFor(owner: string, login: string) {
    const session = await startSession(owner);
    const callback = await installAs(login, session.install_url);
    const returned = outcome((await request(nc, rpc.repohost.setup, callback)).redirect_to);
    expect(returned).toMatchObject({ outcome: 'installed', installation_id: String(callback.installation_id) });
    return { installationId: callback.installation_id, code: returned.code!, verifier: session.verifier };
  }

  async function connectAlice(): Promise<number> {
    const { installationId, code, verifier } = await installFor(alice, 'alice-gh');
    await link(alice, code, verifier);
    return installationId;
  }

  const refusal = (promise: Promise<unknown>) =>
    promise.then(
      () => null,
      (err: unknown) => (err instanceof AppError ? `${err.code}: ${err.message}` : String(err)),
    );

  let aliceInstallation: number;

  it('refuses an install session that would return anywhere but the app', async () => {
    const { challenge } = pkcePair();
    for (const return_to of ['https://evil.example/cb', `${SCHEME}://repohost/setup?x=1`, 'other://repohost/setup']) {
      const err = await request(nc, rpc.repohost.installSession, {
        owner_id: alice,
        return_to,
        code_challenge: challenge,
      }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).code).toBe('invalid_request');
    }
  });

  it('reports not_connected before anything is linked, with the local folder beside it', async () => {
    const connection = ProviderConnection.parse(await request(nc, rpc.repohost.connection, { owner_id: alice }));
    expect(connection.status).toBe('not_connected');
    expect(connection.app_slug).toBe(SLUG);
    expect(connection.install_url).toBe(`${fake.webUrl}/apps/${SLUG}/installations/new`);
    expect(connection.installations.map((i) => i.account)).toEqual(['local']);
  });

  it('links an installation through session → install page → setup callback → code redeemed', async () => {
    const session = await startSession(alice);
    expect(new URL(session.install_url).pathname).toBe(`/apps/${SLUG}/installations/new`);
    expect(Date.parse(session.expires_at) - Date.now()).toBeGreaterThan(9 * 60_000);

    const callback = await installAs('alice-gh', session.install_url);
    expect(callback.setup_action).toBe('install');
    const { redirect_to } = await request(nc, rpc.repohost.setup, callback);
    const returned = outcome(redirect_to);
    expect(returned).toEqual({
      base: RETURN_TO,
      outcome: 'installed',
      installation_id: String(callback.installation_id),
      code: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
    });
    aliceInstallation = callback.installation_id;
    // The callback linked nothing by itself.
    expect(ProviderConnection.parse(await request(nc, rpc.repohost.connection, { owner_id: alice })).status).toBe(
      'not_connected',
    );
    const linked = await request(nc, rpc.repohost.link, {
      owner_id: alice,
      code: returned.code!,
      code_verifier: session.verifier,
    });
    expect(linked.installation).toMatchObject({ id: aliceInstallation, account: 'alice-gh' });

    const connection = ProviderConnection.parse(await request(nc, rpc.repohost.connection, { owner_id: alice }));
    expect(connection.status).toBe('ready');
    expect(connection.installations).toEqual([
      {
        id: aliceInstallation,
        account: 'alice-gh',
        avatar_url: fake.accounts.get('alice-gh')!.avatar_url,
        target_type: 'User',
        repository_selection: 'all',
        suspended: false,
        manage_url: `${fake.webUrl}/settings/installations/${aliceInstallation}`,
      },
      expect.objectContaining({ account: 'local' }),
    ]);
  });

  it('takes a state once: a second use, an unknown one and an expired one link nothing', async () => {
    const session = await startSession(bob);
    const callback = await installAs('bob-gh-not-yet', session.install_url).catch(() => null);
    expect(callback).toBeNull(); // no such GitHub user: the page refuses

    fake.account('bob-gh');
    const bobCallback = await installAs('bob-gh', session.install_url);
    const [first, second] = await Promise.all([
      request(nc, rpc.repohost.setup, bobCallback),
      request(nc, rpc.repohost.setup, bobCallback),
    ]);
    const outcomes = [outcome(first.redirect_to).outcome, outcome(second.redirect_to).outcome].sort();
    expect(outcomes).toEqual(['error', 'installed']);
    const third = await request(nc, rpc.repohost.setup, bobCallback);
    expect(outcome(third.redirect_to)).toEqual({ base: RETURN_TO, outcome: 'error', error: 'invalid_state' });

    const unknown = await request(nc, rpc.repohost.setup, { ...bobCallback, state: 'f'.repeat(48) });
    expect(outcome(unknown.redirect_to)).toMatchObject({ outcome: 'error', error: 'invalid_state' });

    // An expired session: its expiry is moved into the past in repohost's own database.
    const { state } = await startSession(alice);
    await mongo
      .db(serviceDbName(dbPrefix, 'repohost'))
      .collection<{ _id: string; expires_at: Date }>('install_sessions')
      .updateOne({ _id: state }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    const late = await request(nc, rpc.repohost.setup, {
      installation_id: aliceInstallation,
      setup_action: 'install',
      state,
    });
    expect(outcome(late.redirect_to)).toMatchObject({ outcome: 'error', error: 'invalid_state' });
  });

  it('redeems a code once, for the owner of its session, with its verifier only', async () => {
    fake.account('dave-gh');
    const dave = 'usr_dave';
    const { installationId, code, verifier } = await installFor(dave, 'dave-gh');

    // Another caller, even with the verifier, is told nothing about it; the owner needs the verifier.
    expect(await refusal(link('usr_mallory', code, verifier))).toMatch(/^invalid_request: body\.code: unknown/);
    expect(await refusal(link(dave, code, pkcePair().verifier))).toMatch(/^invalid_request: body\.code_verifier: /);
    expect(await refusal(link(dave, 'x'.repeat(43), verifier))).toMatch(/^invalid_request: body\.code: unknown/);
    expect((await request(nc, rpc.repohost.connection, { owner_id: dave })).status).toBe('not_connected');

    // None of that spent it; of concurrent redemptions exactly one links.
    const results = await Promise.all([1, 2, 3].map(() => refusal(link(dave, code, verifier))));
    expect(results.filter((r) => r === null)).toHaveLength(1);
    expect(results.filter((r) => r?.startsWith('invalid_request: body.code: unknown'))).toHaveLength(2);
    const connection = await request(nc, rpc.repohost.connection, { owner_id: dave });
    expect(connection.installations.map((i) => i.id)).toEqual([installationId, 1]);
    expect(await refusal(link(dave, code, verifier))).toMatch(/^invalid_request: body\.code: unknown/);

    // A code past its lifetime: its expiry is moved into the past in repohost's own database.
    const late = await installFor(dave, 'dave-gh');
    const hash = createHash('sha256').update(late.code).digest('hex');
    await mongo
      .db(serviceDbName(dbPrefix, 'repohost'))
      .collection<{ _id: string; expires_at: Date }>('install_link_codes')
      .updateOne({ _id: hash }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expect(await refusal(link(dave, late.code, late.verifier))).toMatch(/^invalid_request: body\.code: unknown/);
  });

  it('without OAuth, links a guessed fresh installation someone else linked to no one else', async () => {
    fake.account('erin-gh');
    const erin = await installFor('usr_erin', 'erin-gh');
    await link('usr_erin', erin.code, erin.verifier);
    // Mallory's own session, a setup callback she forges with erin's id: created a moment ago, so
    // it passes the creation-time check, and the code comes back to mallory's own browser...
    const session = await startSession('usr_mallory');
    const { redirect_to } = await request(nc, rpc.repohost.setup, {
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
    expect((await request(nc, rpc.repohost.connection, { owner_id: 'usr_mallory' })).status).toBe('not_connected');
    // Erin links it again as often as she likes.
    const again = await installFor('usr_erin', 'erin-gh');
    expect((await link('usr_erin', again.code, again.verifier)).installation.id).toBe(erin.installationId);
  });

  it("never links someone else's older installation, and keeps it invisible", async () => {
    const carolInstallation = [...fake.installations.values()].find((i) => i.account.login === 'carol-gh')!;
    const { state } = await startSession('usr_mallory');
    const { redirect_to } = await request(nc, rpc.repohost.setup, {
      installation_id: carolInstallation.id,
      setup_action: 'install',
      state,
    });
    expect(outcome(redirect_to)).toMatchObject({ outcome: 'error', error: 'unverified_installation' });

    const connection = await request(nc, rpc.repohost.connection, { owner_id: 'usr_mallory' });
    expect(connection.status).toBe('not_connected');
    const { repositories } = await request(nc, rpc.repohost.repositories, { owner_id: 'usr_mallory' });
    expect(repositories.map((r) => r.full_name)).toEqual(['local/local-only']);
    const err = await request(nc, rpc.repohost.access, {
      owner_id: 'usr_mallory',
      repository_ids: [secretStuff.id],
    }).catch((e: unknown) => e);
    expect((err as AppError).code).toBe('not_found');
    const missing = await request(nc, rpc.repohost.setup, { setup_action: 'install', state: 'nope' });
    expect(outcome(missing.redirect_to)).toMatchObject({ outcome: 'error', error: 'invalid_state' });
  });

  it('lists the installation repositories merged with local ones, and grants access and tokens', async () => {
    const { repositories } = await request(nc, rpc.repohost.repositories, { owner_id: alice });
    expect(repositories.map((r) => r.full_name)).toEqual(['alice-gh/gadgets', 'alice-gh/widgets', 'local/local-only']);
    const listed = repositories.find((r) => r.repository_id === widgets.id)!;
    expect(listed).toEqual({
      repository_id: widgets.id,
      installation_id: aliceInstallation,
      owner: 'alice-gh',
      name: 'widgets',
      full_name: 'alice-gh/widgets',
      url: fake.cloneUrl('alice-gh/widgets'),
      avatar_url: fake.accounts.get('alice-gh')!.avatar_url,
      private: true,
      default_branch: 'trunk',
    });
    expect((await request(nc, rpc.repohost.repositories, { owner_id: alice, q: 'WIDG' })).repositories).toHaveLength(1);
    expect(
      (await request(nc, rpc.repohost.repositories, { owner_id: bob })).repositories.map((r) => r.full_name),
    ).toEqual(['local/local-only']);

    const access = await request(nc, rpc.repohost.access, {
      owner_id: alice,
      repository_ids: [gadgets.id, widgets.id],
    });
    expect(access.repositories.map((r) => r.name)).toEqual(['gadgets', 'widgets']);

    const held = await heldRun(alice, [widgets]);
    // Whoever may read the caller's inboxes (every runner, for a runner) hears the reply sealed.
    const heard: string[] = [];
    const tap = nc.subscribe('_INBOX.>', {
      callback: (_err, msg) => {
        heard.push(Buffer.from(msg.data).toString('latin1'));
      },
    });
    await nc.flush();
    const { token, expires_at } = await request(nc, rpc.repohost.token, { ...held, repository_ids: [widgets.id] });
    await nc.flush();
    tap.unsubscribe();
    expect(token).toMatch(/^ghs_/);
    expect(heard.length).toBeGreaterThan(0);
    expect(heard.join('\n')).not.toContain(token!);
    expect(Date.parse(expires_at!) - Date.now()).toBeGreaterThan(30 * 60_000);
    // A second ask reuses the token while it has long enough to live.
    const again = await request(nc, rpc.repohost.token, { ...held, repository_ids: [widgets.id] });
    expect(again.token).toBe(token);

    // The token clones the repository it was asked for, and only that one.
    const work = mkdtempSync(join(tmpdir(), 'threadwork-clone-'));
    try {
      const url = new URL(fake.cloneUrl('alice-gh/widgets'));
      url.username = 'x-access-token';
      url.password = token!;
      await gitClone(url.href, join(work, 'w'));
      const other = new URL(fake.cloneUrl('alice-gh/gadgets'));
      other.username = 'x-access-token';
      other.password = token!;
      await expect(gitClone(other.href, join(work, 'g'))).rejects.toThrow();
    } finally {
      rmSync(work, { recursive: true, force: true });
    }

    const local = (await request(nc, rpc.repohost.repositories, { owner_id: alice, q: 'local-only' })).repositories[0]!;
    const localRepo = { id: local.repository_id, full_name: local.full_name };
    const heldLocal = await heldRun(alice, [localRepo]);
    const none = await request(nc, rpc.repohost.token, { ...heldLocal, repository_ids: [local.repository_id] });
    expect(none).toEqual({ token: null, expires_at: null });
    const heldBoth = await heldRun(alice, [widgets, localRepo]);
    const mixed = await request(nc, rpc.repohost.token, {
      ...heldBoth,
      repository_ids: [widgets.id, local.repository_id],
    }).catch((e: unknown) => e);
    expect((mixed as AppError).code).toBe('invalid_request');
    // A run of Bob's naming Alice's repository gets nothing: Bob does not see it.
    const heldByBob = await heldRun(bob, [widgets]);
    const foreign = await request(nc, rpc.repohost.token, { ...heldByBob, repository_ids: [widgets.id] }).catch(
      (e: unknown) => e,
    );
    expect((foreign as AppError).code).toBe('not_found');

    // Every app call so far (installations, tokens) went out with one cached JWT.
    expect(fake.jwtsSeen.size).toBe(1);
  });

  it('hands a token only to the runner holding a live run, for that run’s repositories', async () => {
    const held = await heldRun(alice, [widgets]);
    const refusal = async (req: { run_id: string; claim_id: string; repository_ids: number[] }) => {
      const err = await request(nc, rpc.repohost.token, req).then(
        () => null,
        (e: unknown) => e as AppError,
      );
      return err?.code;
    };
    // A claim id that never held the run: whoever names a run does not get its repositories.
    const stranger = { run_id: held.run_id, claim_id: newClaimId(), repository_ids: [widgets.id] };
    expect(await refusal(stranger)).toBe('already_settled');
    // The holder, for a repository of the owner's that is not the run's.
    expect(await refusal({ ...held, repository_ids: [gadgets.id] })).toBe('invalid_request');
    const missing = { run_id: 'run_missing', claim_id: held.claim_id, repository_ids: [widgets.id] };
    expect(await refusal(missing)).toBe('not_found');
    // Once a newer attempt claims the run (its runner handed it back), the older claim gets nothing more.
    await request(nc, rpc.runs.release, { run_id: held.run_id, attempt: 0, claim_id: held.claim_id });
    await request(nc, rpc.runs.claim, { run_id: held.run_id, runner_id: 'runner-next', claim_id: newClaimId() });
    expect(await refusal({ ...held, repository_ids: [widgets.id] })).toBe('already_settled');
  });

  it('answers GitHub’s failures with a code and a message of its own, and logs GitHub’s text under the request id', async () => {
    // GitHub's messages can echo what the request carried; this one stands for such an echo.
    const echo = 'Branch <threadwork/evil> of repository secret-plans does not exist';
    const held = await heldRun(alice, [gadgets]);
    const ask = (requestId: string) =>
      withRequestId(requestId, () =>
        request(nc, rpc.repohost.token, { ...held, repository_ids: [gadgets.id] }).then(
          () => null,
          (e: unknown) => e as AppError,
        ),
      );

    fake.failNext('POST', /^\/app\/installations\/\d+\/access_tokens$/, {
      status: 422,
      message: echo,
      extra: { errors: [{ resource: 'Branch', code: 'invalid', message: echo }] },
    });
    const refused = await ask('req-github-refused');
    expect(refused).toMatchObject({ code: 'internal', message: 'GitHub refused the request', retryable: false });
    expect(JSON.stringify(refused?.toJSON())).not.toContain('secret-plans');

    fake.failNext('POST', /^\/app\/installations\/\d+\/access_tokens$/, { status: 502, message: echo });
    const down = await ask('req-github-down');
    expect(down).toMatchObject({ code: 'unavailable', message: 'GitHub did not answer; retry later', retryable: true });
    expect(JSON.stringify(down?.toJSON())).not.toContain('secret-plans');

    // The operator finds GitHub's own words by the request's id.
    for (const [requestId, status] of [
      ['req-github-refused', 422],
      ['req-github-down', 502],
    ] as const) {
      const line = logLines
        .map((l) => JSON.parse(l) as { request_id?: string; github?: { status: number; message?: string } })
        .find((l) => l.request_id === requestId && l.github);
      expect(line?.github?.status, requestId).toBe(status);
      expect(line?.github?.message, requestId).toContain('secret-plans');
    }
  });

  describe('webhooks', () => {
    const send = (event: string, payload: unknown, opts: { delivery?: string; signature?: string | null } = {}) => {
      const body = Buffer.from(JSON.stringify(payload));
      const signature = opts.signature === undefined ? signWebhook(SECRET, body) : opts.signature;
      return request(nc, rpc.repohost.webhook, {
        event,
        delivery: opts.delivery ?? `d-${Math.random().toString(36).slice(2)}`,
        ...(signature === null ? {} : { signature }),
        content_type: 'application/json',
        body_base64: body.toString('base64'),
      });
    };

    /** Waits until repohost's consumer has handled everything published to it so far. */
    async function processed(): Promise<void> {
      await waitFor('repohost to handle every DOMAIN event', async () => {
        const info = await jetstream.jsm.consumers.info(DOMAIN_STREAM.name, REPOHOST_CONSUMER);
        return info.num_pending === 0 && info.num_ack_pending === 0;
      });
    }

    it('takes a signed delivery once and refuses bad or missing signatures', async () => {
      const queued: string[] = [];
      const sub = nc.subscribe(domainEvents.webhookReceived.subject);
      void (async () => {
        for await (const msg of sub) queued.push(msg.string());
      })();
      const payload = fake.payloads.repository('edited', widgets.id);
      expect(await send('repository', payload, { delivery: 'delivery-1' })).toEqual({ status: 'accepted' });
      expect(await send('repository', payload, { delivery: 'delivery-1' })).toEqual({ status: 'duplicate' });
      for (const signature of [null, signWebhook('wrong', Buffer.from(JSON.stringify(payload))), 'sha256=zz']) {
        const err = await send('repository', payload, { signature }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(AppError);
        expect((err as AppError).code).toBe('unauthorized');
      }
      // A refused delivery is not remembered either: the same id, signed, is taken.
      const other = fake.payloads.repository('privatized', widgets.id);
      const err = await send('repository', other, { delivery: 'delivery-2', signature: null }).catch((e: unknown) => e);
      expect((err as AppError).code).toBe('unauthorized');
      expect(await send('repository', other, { delivery: 'delivery-2' })).toEqual({ status: 'accepted' });
      // The same signed body under a new delivery id is a replay, refused; under its own id a repeat.
      expect(await refusal(send('repository', payload, { delivery: 'delivery-3' }))).toMatch(
        /^unauthorized: .*replayed/,
      );
      expect(await send('repository', payload, { delivery: 'delivery-1' })).toEqual({ status: 'duplicate' });
      // A payload sent under another event's name is refused, and not remembered either.
      const status = fake.payloads.repository('publicized', widgets.id);
      expect(await refusal(send('pull_request', status, { delivery: 'delivery-4' }))).toMatch(
        /^invalid_request: headers\.x-github-event: does not match the payload/,
      );
      expect(await send('repository', status, { delivery: 'delivery-4' })).toEqual({ status: 'accepted' });
      await nc.flush();
      await waitFor('the three deliveries on the queue', () => queued.length === 3);
      expect(queued).toHaveLength(3);
      sub.unsubscribe();
    });

    it('answers unavailable for a delivery it could not queue, and takes it when it comes again', async () => {
      const payload = { ...fake.payloads.repository('edited', widgets.id), hook_id: Date.now() };
      const delivery = uniqueId('d-');
      const { config, state } = await jetstream.jsm.streams.info(DOMAIN_STREAM.name);
      // DOMAIN takes nothing more (max_msgs reached, discard new): the delivery cannot be queued.
      await jetstream.jsm.streams.update(DOMAIN_STREAM.name, {
        ...config,
        max_msgs: state.messages,
        discard: DiscardPolicy.New,
      });
      try {
        expect(await refusal(send('repository', payload, { delivery }))).toMatch(/^unavailable: /);
      } finally {
        await jetstream.jsm.streams.update(DOMAIN_STREAM.name, config);
      }
      // Not remembered: GitHub's redelivery of the same signed body under the same id is taken.
      expect(await send('repository', payload, { delivery })).toEqual({ status: 'accepted' });
      await processed();
    });

    it('follows renames, removals and additions of repositories', async () => {
      const repo = fake.repositories.get(gadgets.id)!;
      repo.name = 'gizmos';
      repo.full_name = 'alice-gh/gizmos';
      await send('repository', fake.payloads.repository('renamed', gadgets.id));
      await processed();
      let names = (await request(nc, rpc.repohost.repositories, { owner_id: alice })).repositories.map(
        (r) => r.full_name,
      );
      expect(names).toEqual(['alice-gh/gizmos', 'alice-gh/widgets', 'local/local-only']);

      const installation = fake.installations.get(aliceInstallation)!;
      installation.repository_selection = 'selected';
      installation.repository_ids = [widgets.id];
      await send(
        'installation_repositories',
        fake.payloads.installationRepositories('removed', aliceInstallation, [gadgets.id]),
      );
      await processed();
      names = (await request(nc, rpc.repohost.repositories, { owner_id: alice })).repositories.map((r) => r.full_name);
      expect(names).toEqual(['alice-gh/widgets', 'local/local-only']);

      installation.repository_ids = [widgets.id, gadgets.id];
      await send(
        'installation_repositories',
        fake.payloads.installationRepositories('added', aliceInstallation, [gadgets.id]),
      );
      await processed();
      names = (await request(nc, rpc.repohost.repositories, { owner_id: alice })).repositories.map((r) => r.full_name);
      expect(names).toEqual(['alice-gh/gizmos', 'alice-gh/widgets', 'local/local-only']);
    });

    it('opens a draft pull request for a candidate and follows its checks through webhooks', async () => {
      const held = await heldRun(alice, [widgets]);
      const threadId = held.thread.id;
      const prr = held.thread.prr[0]!;
      const branch = `threadwork/${threadId}`;
      const pushed = await pushAsRunner(nc, fake, {
        ...held,
        repository: widgets,
        branch,
        files: { 'CHANGELOG.md': '# Changes\n' },
      });
      const event = candidateProduced({
        thread_id: threadId,
        run_id: held.run_id,
        owner_id: alice,
        project_repository_id: prr,
        repository_id: widgets.id,
        branch,
        base_revision: pushed.baseRevision,
        candidate_revision: pushed.revision,
      });
      // Forged (no holder attested it), or attested by the holder of another owner's run: no pull
      // request, whatever it names.
      await publishCandidate(null, event, `${held.run_id}:forged`);
      const bobs = await heldRun(bob, [widgets]);
      await publishCandidate(bobs, { ...event, run_id: bobs.run_id }, `${bobs.run_id}:borrowed`);
      await processed();
      expect(fake.pulls.filter((p) => p.head === branch)).toHaveLength(0);
      // Twice, as a redelivery would: one pull request.
      await publishCandidate(held, event, `${held.run_id}:${prr}`);
      await publishCandidate(held, event, `${held.run_id}:${prr}:again`);
      await processed();

      const read = () =>
        request(nc, rpc.repohost.publication, { owner_id: alice, thread_id: threadId, project_repository_id: prr });
      const publication = Publication.parse(await read());
      expect(fake.pulls.filter((p) => p.head === branch)).toHaveLength(1);
      const pull = fake.pulls.find((p) => p.head === branch)!;
      expect(pull).toMatchObject({ base: 'trunk', draft: true, state: 'open' });
      expect(publication).toMatchObject({
        projectRepositoryId: prr,
        repository: { owner: 'alice-gh', name: 'widgets' },
        prNumber: pull.number,
        prUrl: `${fake.webUrl}/alice-gh/widgets/pull/${pull.number}`,
        branch,
        headSha: pushed.revision,
        state: 'draft',
        checks: [],
        commitStatuses: [],
        checksAggregate: 'none',
      });
      expect(
        await request(nc, rpc.repohost.publication, {
          owner_id: bob,
          thread_id: threadId,
          project_repository_id: prr,
        }),
      ).toBeNull();

      const check = fake.addCheckRun('alice-gh/widgets', pushed.revision, { name: 'build', status: 'in_progress' });
      await send('check_run', fake.payloads.checkRun('created', check.id));
      await processed();
      expect((await read())?.checksAggregate).toBe('pending');

      fake.updateCheckRun(check.id, {
        status: 'completed',
        conclusion: 'failure',
        completed_at: new Date().toISOString(),
      });
      await send('check_run', fake.payloads.checkRun('completed', check.id));
      await processed();
      expect(await read()).toMatchObject({
        checksAggregate: 'failure',
        checks: [{ id: check.id, name: 'build', status: 'completed', conclusion: 'failure' }],
      });

      fake.updateCheckRun(check.id, { conclusion: 'success' });
      const status = fake.setStatus('alice-gh/widgets', pushed.revision, { context: 'lint', state: 'pending' });
      await send('status', fake.payloads.status(status.id));
      await processed();
      expect((await read())?.checksAggregate).toBe('pending');
      const done = fake.setStatus('alice-gh/widgets', pushed.revision, { context: 'lint', state: 'success' });
      await send('status', fake.payloads.status(done.id));
      await processed();
      expect(await read()).toMatchObject({
        checksAggregate: 'success',
        commitStatuses: [{ context: 'lint', state: 'success' }],
      });

      pull.state = 'closed';
      await send('pull_request', fake.payloads.pullRequest('closed', 'alice-gh/widgets', pull.number));
      await processed();
      expect((await read())?.state).toBe('closed');
      // The next run's candidate reopens it.
      for (const to of ['running', 'completed'] as const) {
        await request(nc, rpc.runs.transition, { run_id: held.run_id, attempt: 0, claim_id: held.claim_id, to });
      }
      const next = await heldRun(alice, [widgets], held.thread);
      await publishCandidate(
        next,
        { ...event, run_id: next.run_id, at: new Date().toISOString() },
        `${next.run_id}:${prr}`,
      );
      await processed();
      expect((await read())?.state).toBe('draft');
      expect(fake.pulls.filter((p) => p.head === branch)).toHaveLength(1);
    });

    it('forgets an uninstalled installation, its times given as Unix seconds as GitHub sends them', async () => {
      const payload = fake.payloads.installation('deleted', aliceInstallation);
      const installation = {
        ...(payload.installation as object),
        created_at: 1_700_000_000,
        updated_at: 1_700_000_000,
      };
      await send('installation', { ...payload, installation });
      await processed();
      const connection = await request(nc, rpc.repohost.connection, { owner_id: alice });
      expect(connection.status).toBe('not_connected');
      const names = (await request(nc, rpc.repohost.repositories, { owner_id: alice })).repositories.map(
        (r) => r.full_name,
      );
      expect(names).toEqual(['local/local-only']);
      // Connecting again brings it back.
      fake.installations.delete(aliceInstallation);
      aliceInstallation = await connectAlice();
      expect((await request(nc, rpc.repohost.connection, { owner_id: alice })).status).toBe('ready');
    });
  });
});
