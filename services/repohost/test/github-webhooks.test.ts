import { DiscardPolicy } from '@nats-io/jetstream';
import { DOMAIN_STREAM, Publication, domainEvents, rpc } from '@threadwork/contracts';
import { AppError, request } from '@threadwork/platform';
import { candidateProduced, domainHandled, pushAsRunner, signWebhook, uniqueId, waitFor } from '@threadwork/testing';
import { beforeAll, describe, expect, it } from 'vitest';
import { REPOHOST_CONSUMER } from '../src/index.js';
import { SECRET, alice, bob, refusal, useGitHubProvider } from './support/github.js';

describe('repohost GitHub App provider', () => {
  const gh = useGitHubProvider();
  const { heldRun, publishCandidate, connectAlice } = gh;

  let aliceInstallation: number;
  beforeAll(async () => {
    aliceInstallation = await connectAlice();
  });

  describe('webhooks', () => {
    const send = (event: string, payload: unknown, opts: { delivery?: string; signature?: string | null } = {}) => {
      const body = Buffer.from(JSON.stringify(payload));
      const signature = opts.signature === undefined ? signWebhook(SECRET, body) : opts.signature;
      return request(gh.nc, rpc.repohost.webhook, {
        event,
        delivery: opts.delivery ?? `d-${Math.random().toString(36).slice(2)}`,
        ...(signature === null ? {} : { signature }),
        content_type: 'application/json',
        body_base64: body.toString('base64'),
      });
    };

    /** Waits until repohost's consumer has handled everything published to it so far. */
    const processed = () => domainHandled(gh.jetstream.jsm, REPOHOST_CONSUMER);

    /**
     * A held run of alice's that pushed a candidate of `files`, the candidate's event (not published
     * yet), and a read of its publication.
     */
    async function candidate(files: Record<string, string>) {
      const held = await heldRun(alice, [gh.widgets]);
      const prr = held.thread.prr[0]!;
      const branch = `threadwork/${held.thread.id}`;
      const pushed = await pushAsRunner(gh.nc, gh.fake, { ...held, repository: gh.widgets, branch, files });
      const event = candidateProduced({
        thread_id: held.thread.id,
        run_id: held.run_id,
        owner_id: alice,
        project_repository_id: prr,
        repository_id: gh.widgets.id,
        branch,
        base_revision: pushed.baseRevision,
        candidate_revision: pushed.revision,
      });
      const read = () =>
        request(gh.nc, rpc.repohost.publication, {
          owner_id: alice,
          thread_id: held.thread.id,
          project_repository_id: prr,
        });
      return { held, prr, branch, pushed, event, read };
    }

    /** As `candidate`, with the event published by the run's holder and handled: its pull request is open. */
    async function published(files: Record<string, string>) {
      const made = await candidate(files);
      await publishCandidate(made.held, made.event, `${made.held.run_id}:${made.prr}`);
      await processed();
      return made;
    }

    it('takes a signed delivery once and refuses bad or missing signatures', async () => {
      const queued: string[] = [];
      const sub = gh.nc.subscribe(domainEvents.webhookReceived.subject);
      void (async () => {
        for await (const msg of sub) queued.push(msg.string());
      })();
      const payload = gh.fake.payloads.repository('edited', gh.widgets.id);
      expect(await send('repository', payload, { delivery: 'delivery-1' })).toEqual({ status: 'accepted' });
      expect(await send('repository', payload, { delivery: 'delivery-1' })).toEqual({ status: 'duplicate' });
      for (const signature of [null, signWebhook('wrong', Buffer.from(JSON.stringify(payload))), 'sha256=zz']) {
        const err = await send('repository', payload, { signature }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(AppError);
        expect((err as AppError).code).toBe('unauthorized');
      }
      // A refused delivery is not remembered either: the same id, signed, is taken.
      const other = gh.fake.payloads.repository('privatized', gh.widgets.id);
      const err = await send('repository', other, { delivery: 'delivery-2', signature: null }).catch((e: unknown) => e);
      expect((err as AppError).code).toBe('unauthorized');
      expect(await send('repository', other, { delivery: 'delivery-2' })).toEqual({ status: 'accepted' });
      // The same signed body under a new delivery id is a replay, refused; under its own id a repeat.
      expect(await refusal(send('repository', payload, { delivery: 'delivery-3' }))).toMatch(
        /^unauthorized: .*replayed/,
      );
      expect(await send('repository', payload, { delivery: 'delivery-1' })).toEqual({ status: 'duplicate' });
      // A payload sent under another event's name is refused, and not remembered either.
      const status = gh.fake.payloads.repository('publicized', gh.widgets.id);
      expect(await refusal(send('pull_request', status, { delivery: 'delivery-4' }))).toMatch(
        /^invalid_request: headers\.x-github-event: does not match the payload/,
      );
      expect(await send('repository', status, { delivery: 'delivery-4' })).toEqual({ status: 'accepted' });
      await gh.nc.flush();
      await waitFor('the three deliveries on the queue', () => queued.length === 3);
      expect(queued).toHaveLength(3);
      sub.unsubscribe();
    });

    it('answers unavailable for a delivery it could not queue, and takes it when it comes again', async () => {
      const payload = { ...gh.fake.payloads.repository('edited', gh.widgets.id), hook_id: Date.now() };
      const delivery = uniqueId('d-');
      const { config, state } = await gh.jetstream.jsm.streams.info(DOMAIN_STREAM.name);
      // DOMAIN takes nothing more (max_msgs reached, discard new): the delivery cannot be queued.
      await gh.jetstream.jsm.streams.update(DOMAIN_STREAM.name, {
        ...config,
        max_msgs: state.messages,
        discard: DiscardPolicy.New,
      });
      try {
        expect(await refusal(send('repository', payload, { delivery }))).toMatch(/^unavailable: /);
      } finally {
        await gh.jetstream.jsm.streams.update(DOMAIN_STREAM.name, config);
      }
      // Not remembered: GitHub's redelivery of the same signed body under the same id is taken.
      expect(await send('repository', payload, { delivery })).toEqual({ status: 'accepted' });
      await processed();
    });

    it('follows renames, removals and additions of repositories', async () => {
      const repo = gh.fake.repositories.get(gh.gadgets.id)!;
      repo.name = 'gizmos';
      repo.full_name = 'alice-gh/gizmos';
      await send('repository', gh.fake.payloads.repository('renamed', gh.gadgets.id));
      await processed();
      let names = (await request(gh.nc, rpc.repohost.repositories, { owner_id: alice })).repositories.map(
        (r) => r.full_name,
      );
      expect(names).toEqual(['alice-gh/gizmos', 'alice-gh/widgets', 'local/local-only']);

      const installation = gh.fake.installations.get(aliceInstallation)!;
      installation.repository_selection = 'selected';
      installation.repository_ids = [gh.widgets.id];
      await send(
        'installation_repositories',
        gh.fake.payloads.installationRepositories('removed', aliceInstallation, [gh.gadgets.id]),
      );
      await processed();
      names = (await request(gh.nc, rpc.repohost.repositories, { owner_id: alice })).repositories.map(
        (r) => r.full_name,
      );
      expect(names).toEqual(['alice-gh/widgets', 'local/local-only']);

      installation.repository_ids = [gh.widgets.id, gh.gadgets.id];
      await send(
        'installation_repositories',
        gh.fake.payloads.installationRepositories('added', aliceInstallation, [gh.gadgets.id]),
      );
      await processed();
      names = (await request(gh.nc, rpc.repohost.repositories, { owner_id: alice })).repositories.map(
        (r) => r.full_name,
      );
      expect(names).toEqual(['alice-gh/gizmos', 'alice-gh/widgets', 'local/local-only']);
    });

    it('opens a draft pull request for a candidate and follows its checks through webhooks', async () => {
      const { held, prr, branch, pushed, event, read } = await candidate({ 'CHANGELOG.md': '# Changes\n' });
      const threadId = held.thread.id;
      // Forged (no holder attested it), or attested by the holder of another owner's run: no pull
      // request, whatever it names.
      await publishCandidate(null, event, `${held.run_id}:forged`);
      const bobs = await heldRun(bob, [gh.widgets]);
      await publishCandidate(bobs, { ...event, run_id: bobs.run_id }, `${bobs.run_id}:borrowed`);
      await processed();
      expect(gh.fake.pulls.filter((p) => p.head === branch)).toHaveLength(0);
      // Twice, as a redelivery would: one pull request.
      await publishCandidate(held, event, `${held.run_id}:${prr}`);
      await publishCandidate(held, event, `${held.run_id}:${prr}:again`);
      await processed();

      const publication = Publication.parse(await read());
      expect(gh.fake.pulls.filter((p) => p.head === branch)).toHaveLength(1);
      const pull = gh.fake.pulls.find((p) => p.head === branch)!;
      expect(pull).toMatchObject({ base: 'trunk', draft: true, state: 'open' });
      expect(publication).toMatchObject({
        projectRepositoryId: prr,
        repository: { owner: 'alice-gh', name: 'widgets' },
        prNumber: pull.number,
        prUrl: `${gh.fake.webUrl}/alice-gh/widgets/pull/${pull.number}`,
        branch,
        headSha: pushed.revision,
        state: 'draft',
        checks: [],
        commitStatuses: [],
        checksAggregate: 'none',
      });
      expect(
        await request(gh.nc, rpc.repohost.publication, {
          owner_id: bob,
          thread_id: threadId,
          project_repository_id: prr,
        }),
      ).toBeNull();

      const check = gh.fake.addCheckRun('alice-gh/widgets', pushed.revision, { name: 'build', status: 'in_progress' });
      await send('check_run', gh.fake.payloads.checkRun('created', check.id));
      await processed();
      expect((await read())?.checksAggregate).toBe('pending');

      gh.fake.updateCheckRun(check.id, {
        status: 'completed',
        conclusion: 'failure',
        completed_at: new Date().toISOString(),
      });
      await send('check_run', gh.fake.payloads.checkRun('completed', check.id));
      await processed();
      expect(await read()).toMatchObject({
        checksAggregate: 'failure',
        checks: [{ id: check.id, name: 'build', status: 'completed', conclusion: 'failure' }],
      });

      gh.fake.updateCheckRun(check.id, { conclusion: 'success' });
      const status = gh.fake.setStatus('alice-gh/widgets', pushed.revision, { context: 'lint', state: 'pending' });
      await send('status', gh.fake.payloads.status(status.id));
      await processed();
      expect((await read())?.checksAggregate).toBe('pending');
      const done = gh.fake.setStatus('alice-gh/widgets', pushed.revision, { context: 'lint', state: 'success' });
      await send('status', gh.fake.payloads.status(done.id));
      await processed();
      expect(await read()).toMatchObject({
        checksAggregate: 'success',
        commitStatuses: [{ context: 'lint', state: 'success' }],
      });

      pull.state = 'closed';
      await send('pull_request', gh.fake.payloads.pullRequest('closed', 'alice-gh/widgets', pull.number));
      await processed();
      expect((await read())?.state).toBe('closed');
      // The next run's candidate reopens it.
      for (const to of ['running', 'completed'] as const) {
        await request(gh.nc, rpc.runs.transition, { run_id: held.run_id, attempt: 0, claim_id: held.claim_id, to });
      }
      const next = await heldRun(alice, [gh.widgets], held.thread);
      await publishCandidate(
        next,
        { ...event, run_id: next.run_id, at: new Date().toISOString() },
        `${next.run_id}:${prr}`,
      );
      await processed();
      expect((await read())?.state).toBe('draft');
      expect(gh.fake.pulls.filter((p) => p.head === branch)).toHaveLength(1);
    });

    it('keeps the checks of the read begun last when an earlier read of them answers later', async () => {
      const { pushed, read } = await published({ 'NOTES.md': 'slow\n' });

      // The first delivery's read of the checks sees the run in progress, but its commit statuses
      // come back only after a second delivery has read the run completed and stored it.
      const check = gh.fake.addCheckRun('alice-gh/widgets', pushed.revision, { name: 'test', status: 'in_progress' });
      const slow = gh.fake.holdNext('GET', new RegExp(`/commits/${pushed.revision}/status$`));
      await send('check_run', gh.fake.payloads.checkRun('created', check.id));
      await slow.arrived;
      gh.fake.updateCheckRun(check.id, {
        status: 'completed',
        conclusion: 'success',
        completed_at: new Date().toISOString(),
      });
      await send('check_run', gh.fake.payloads.checkRun('completed', check.id));
      await waitFor('the second delivery to store the completed run', async () => {
        return (await read())?.checksAggregate === 'success';
      });
      slow.release();
      await processed();
      expect(await read()).toMatchObject({
        checksAggregate: 'success',
        checks: [{ id: check.id, status: 'completed', conclusion: 'success' }],
      });
    });

    it('keeps a reopened pull request open when a read from before the reopening answers after it', async () => {
      const { held, prr, branch, pushed, event, read } = await published({ 'REOPEN.md': 'again\n' });
      const pull = gh.fake.pulls.find((p) => p.head === branch)!;
      pull.state = 'closed';
      await send('pull_request', gh.fake.payloads.pullRequest('closed', 'alice-gh/widgets', pull.number));
      await processed();
      expect((await read())?.state).toBe('closed');

      // The next run's candidate looks at the closed pull request (its answer held), a webhook's
      // sync begins meanwhile and reads it closed (its last read held), then the candidate reopens
      // it and stores that; the sync's answer comes last.
      const candidateLook = gh.fake.holdNext('GET', new RegExp(`/pulls/${pull.number}$`));
      const syncLast = gh.fake.holdNext('GET', new RegExp(`/commits/${pushed.revision}/status$`));
      for (const to of ['running', 'completed'] as const) {
        await request(gh.nc, rpc.runs.transition, { run_id: held.run_id, attempt: 0, claim_id: held.claim_id, to });
      }
      const next = await heldRun(alice, [gh.widgets], held.thread);
      await publishCandidate(
        next,
        { ...event, run_id: next.run_id, at: new Date().toISOString() },
        `${next.run_id}:${prr}`,
      );
      await candidateLook.arrived;
      // Any delivery about the pull request makes a sync, which reads GitHub whatever the action says.
      await send('pull_request', gh.fake.payloads.pullRequest('reopened', 'alice-gh/widgets', pull.number));
      await syncLast.arrived;
      candidateLook.release();
      await waitFor('the candidate to reopen the pull request', async () => (await read())?.state === 'draft');
      syncLast.release();
      await processed();
      expect((await read())?.state).toBe('draft');
      expect(pull.state).toBe('open');
    });

    it('forgets an uninstalled installation, its times given as Unix seconds as GitHub sends them', async () => {
      const payload = gh.fake.payloads.installation('deleted', aliceInstallation);
      const installation = {
        ...(payload.installation as object),
        created_at: 1_700_000_000,
        updated_at: 1_700_000_000,
      };
      await send('installation', { ...payload, installation });
      await processed();
      const connection = await request(gh.nc, rpc.repohost.connection, { owner_id: alice });
      expect(connection.status).toBe('not_connected');
      const names = (await request(gh.nc, rpc.repohost.repositories, { owner_id: alice })).repositories.map(
        (r) => r.full_name,
      );
      expect(names).toEqual(['local/local-only']);
      // Connecting again brings it back.
      gh.fake.installations.delete(aliceInstallation);
      aliceInstallation = await connectAlice();
      expect((await request(gh.nc, rpc.repohost.connection, { owner_id: alice })).status).toBe('ready');
    });
  });
});
