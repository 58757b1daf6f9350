import {
  CONSUMERS,
  domainEvents,
  MessagePage,
  rpc,
  SERVICES,
  Task,
  WorkList,
  type EventDef,
} from '@threadwork/contracts';
import { jetStreamOf, publishJson, request } from '@threadwork/platform';
import { newClaimId, uniqueId, RunDriver, waitFor } from '@threadwork/testing';
import { describe, expect, it } from 'vitest';
import {
  alice,
  bob,
  connectAs,
  createThread,
  eventsOf,
  handledUpTo,
  hasBinary,
  json,
  natsRefuses,
  refusal,
  repoId,
  stack,
  steer,
  runOf,
  usePrincipalsStack,
} from './support/principals.js';

// What one service's NATS key still lets its holder do (support/principals.ts says what and why).
// Here: runs held by the test as their runner (no real runner is started here).

describe.skipIf(!hasBinary)('what one service’s NATS key can still do', () => {
  usePrincipalsStack({ withRunner: false });

  describe('the runner’s key, for a run another runner holds', () => {
    it('cannot move it, append to its log or ask its owner a question: the claim, not the attempt number, fences', async () => {
      const runnerKey = await connectAs('runner');
      const thread = await createThread(alice);
      // The legitimate runner (same NATS identity: every runner shares it) claims the run.
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      await holder.start();

      // The attacker knows the run id (jobs name it) and can guess the attempt (0), not the claim.
      for (const attempt of [0, 1]) {
        const forged = new RunDriver(runnerKey, thread.run_id, attempt, newClaimId());
        expect((await refusal(forged.to('completed'))).code).toBe('already_settled');
        expect((await refusal(forged.say('FORGED: the work is done'))).code).toBe('already_settled');
        expect(
          (
            await refusal(
              forged.ask([{ id: 'q', header: 'Q', question: 'FORGED?', isOther: false, isSecret: false, options: [] }]),
            )
          ).code,
        ).toBe('already_settled');
      }
      expect(await runOf(alice, thread.run_id)).toMatchObject({ status: 'running', attempt: 0 });
      expect(JSON.stringify((await eventsOf(alice, thread.run_id)).events)).not.toContain('FORGED');

      // The holder goes on as before.
      await holder.say('the real reply');
      await holder.to('completed');
      const page = await eventsOf(alice, thread.run_id);
      expect(page).toMatchObject({ status: 'completed', terminal: true });
      expect(JSON.stringify(page.events)).toContain('the real reply');
      expect(JSON.stringify(page.events)).not.toContain('FORGED');
    });
  });

  describe('reads of a user’s data', () => {
    it('the runner’s key reads no run for an owner: only the run it claimed, by that claim', async () => {
      const runnerKey = await connectAs('runner');
      for (const subject of [
        SERVICES.runs.subjects.get,
        SERVICES.runs.subjects.getMany,
        SERVICES.runs.subjects.eventsPage,
        SERVICES.runs.subjects.interactionGet,
        SERVICES.runs.subjects.interactionList,
      ]) {
        expect(await natsRefuses(runnerKey, subject), subject).toBe(true);
      }
      const thread = await createThread(alice);
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      await holder.start();
      const read = (attempt: number, claim_id: string) =>
        request(runnerKey, rpc.runs.attemptState, { run_id: thread.run_id, attempt, claim_id });
      // Another claim id, for the attempt that is or for one that is not: as if the run did not exist.
      expect((await refusal(read(0, newClaimId()))).code).toBe('not_found');
      expect((await refusal(read(1, newClaimId()))).code).toBe('not_found');
      // The holder reads where its run stands, and nothing of the owner's data.
      expect(await read(0, holder.claimId)).toEqual({ status: 'running', attempt: 0, terminal: false });
      await holder.to('completed');
      expect(await read(0, holder.claimId)).toEqual({ status: 'completed', attempt: 0, terminal: true });
    });

    it('a key that reads for owners reads nothing for no one, and another owner’s run or question is not found', async () => {
      const [threadsKey, gatewayKey, runnerKey] = await Promise.all([
        connectAs('threads'),
        connectAs('gateway'),
        connectAs('runner'),
      ]);
      const thread = await createThread(alice);
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      await holder.start();
      const asked = await holder.ask([
        { id: 'q', header: 'Q', question: 'Which?', isOther: false, isSecret: false, options: [] },
      ]);
      const run_id = thread.run_id;
      const page = { run_id, from: 1, limit: 100 };

      // Without an owner: refused outright, whoever asks.
      const ownerless = { run_id, interaction_id: asked.id, from: 1, limit: 100 } as never;
      expect((await refusal(request(threadsKey, rpc.runs.get, ownerless))).code).toBe('invalid_request');
      expect((await refusal(request(gatewayKey, rpc.runs.get, ownerless))).code).toBe('invalid_request');
      expect((await refusal(request(gatewayKey, rpc.runs.eventsPage, ownerless))).code).toBe('invalid_request');
      expect((await refusal(request(gatewayKey, rpc.runs.interactionGet, ownerless))).code).toBe('invalid_request');
      // For another owner: not found.
      const asBob = { owner_id: bob.id };
      expect((await refusal(request(threadsKey, rpc.runs.get, { ...asBob, run_id }))).code).toBe('not_found');
      expect((await refusal(request(gatewayKey, rpc.runs.eventsPage, { ...asBob, ...page }))).code).toBe('not_found');
      const bobsQuestion = request(gatewayKey, rpc.runs.interactionGet, { ...asBob, interaction_id: asked.id });
      expect((await refusal(bobsQuestion)).code).toBe('not_found');
      expect((await stack.fetch(`/v1/runs/${run_id}`, { user: bob })).status).toBe(404);

      // For its owner, as before.
      const asAlice = { owner_id: alice.id };
      expect(await request(threadsKey, rpc.runs.get, { ...asAlice, run_id })).toMatchObject({ id: run_id });
      const events = await request(gatewayKey, rpc.runs.eventsPage, { ...asAlice, ...page });
      expect(events.events.length).toBeGreaterThan(0);
      const question = await request(gatewayKey, rpc.runs.interactionGet, { ...asAlice, interaction_id: asked.id });
      expect(question).toMatchObject({ id: asked.id, run_id });
      expect(await runOf(alice, run_id)).toMatchObject({ status: 'waiting_for_input' });
    });
  });

  describe('runner events about a run', () => {
    it('the runner’s key alone makes threads store no reply, apply no steer, show no figures and set no sandbox status', async () => {
      const runnerKey = await connectAs('runner');
      const { js } = await jetStreamOf(runnerKey);
      const thread = await createThread(alice);
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      await holder.start();
      const pending = await steer(alice, thread.id, 'Keep going');
      const work = await json(await stack.fetch('/v1/work', { user: alice }), 200, WorkList);
      const project = work.projects.find((p) => p.threads.some((t) => t.id === thread.id))!;
      const at = new Date().toISOString();
      const about = { run_id: thread.run_id, thread_id: thread.id };
      const forged: [EventDef, Record<string, unknown>][] = [
        [domainEvents.messageCompleted, { ...about, message_key: `${thread.run_id}:reply`, text: 'FORGED', at }],
        [domainEvents.controlApplied, { ...about, control_id: pending.control.id, at }],
        [
          domainEvents.sandboxStatus,
          { thread_id: thread.id, run_id: thread.run_id, status: 'failed', sandbox_id: 'sbx_f', reason: 'FORGED', at },
        ],
        [
          domainEvents.candidateProduced,
          {
            ...about,
            owner_id: alice.id,
            project_repository_id: project.repositories[0]!.id,
            repository_id: repoId,
            branch: `threadwork/${thread.id}`,
            base_branch: 'main',
            base_revision: 'a'.repeat(40),
            candidate_revision: 'b'.repeat(40),
            diff: 'FORGED',
            truncated: false,
            files: [],
            stats: { additions: 1000, deletions: 1000 },
            at,
          },
        ],
      ];
      let last = 0;
      for (const [def, event] of forged) {
        const ack = await publishJson(js, def.subject, event, {
          msgId: uniqueId('forged-'),
        });
        last = ack.seq;
      }
      await handledUpTo(CONSUMERS.threads, last);

      const messages = async () =>
        (await json(await stack.fetch(`/v1/threads/${thread.id}/messages`, { user: alice }), 200, MessagePage))
          .messages;
      expect(JSON.stringify(await messages())).not.toContain('FORGED');
      const controls = await stack.fetch(`/v1/threads/${thread.id}/controls`, { user: alice });
      expect(((await controls.json()) as { controls: { status: string }[] }).controls.map((c) => c.status)).toEqual([
        'pending',
      ]);
      const task = await json(await stack.fetch(`/v1/tasks/${thread.id}`, { user: alice }), 200, Task);
      expect(task.sandbox_status).toBeNull();
      const after = await json(await stack.fetch('/v1/work', { user: alice }), 200, WorkList);
      expect(after.projects.flatMap((p) => p.threads).find((t) => t.id === thread.id)).not.toHaveProperty('additions');

      // The run's holder, with the same key, publishes what counts.
      const reply = { ...about, message_key: `${thread.run_id}:reply`, text: 'The real reply', at };
      await holder.publish(js, domainEvents.messageCompleted, reply, `${thread.run_id}:reply`);
      await waitFor('the reply', async () => JSON.stringify(await messages()).includes('The real reply'));
    });
  });

  describe('replies to the runner', () => {
    it('a sealed endpoint answers a request without a reply key with a refusal, and does nothing', async () => {
      const runnerKey = await connectAs('runner');
      const thread = await createThread(alice, `Unsealed ${uniqueId('PROMPTMARK')}`);
      const ask = async (subject: string, payload: unknown) =>
        JSON.parse(
          new TextDecoder().decode(
            (await runnerKey.request(subject, new TextEncoder().encode(JSON.stringify(payload)), { timeout: 10_000 }))
              .data,
          ),
        ) as unknown;
      const claimId = newClaimId();
      for (const [subject, payload] of [
        [SERVICES.runs.subjects.claim, { run_id: thread.run_id, runner_id: 'unsealed', claim_id: claimId }],
        [SERVICES.repohost.subjects.token, { run_id: thread.run_id, claim_id: claimId, repository_ids: [repoId] }],
        [
          SERVICES.runs.subjects.interactionSettlement,
          { run_id: thread.run_id, claim_id: claimId, interaction_id: 'int_x' },
        ],
        [SERVICES.threads.subjects.steerRead, { run_id: thread.run_id, claim_id: claimId, control_id: 'ctl_x' }],
      ] as const) {
        expect(await ask(subject, payload), subject).toMatchObject({
          ok: false,
          error: { code: 'invalid_request', message: expect.stringContaining('sealed') },
        });
      }
      // The refused claim took nothing: the run still waits for a runner, and a sealed claim takes it.
      expect((await runOf(alice, thread.run_id)).status).toBe('queued');
      const holder = await RunDriver.claim(runnerKey, thread.run_id);
      expect(holder.attempt).toBe(0);
    });
  });
});
