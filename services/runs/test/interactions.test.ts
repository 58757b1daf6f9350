import { randomBytes } from 'node:crypto';
import { rpc, RunSignal, subjects, type Question } from '@threadwork/contracts';
import { decodeJson, request } from '@threadwork/platform';
import { newClaimId, uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failure, getRun, type Harness, readLog, runningRun, silence, startHarness, statusLog } from './helpers.js';

const fileQuestion: Question = {
  id: 'file',
  header: 'File',
  question: 'Which file should I change?',
  isOther: false,
  isSecret: false,
  options: [
    { label: 'README.md', description: 'the readme' },
    { label: 'NOTES.md', description: 'the notes' },
  ],
};
const tokenQuestion: Question = {
  id: 'token',
  header: 'Token',
  question: 'Which deploy token should I use?',
  isOther: false,
  isSecret: true,
  options: [],
};

describe('interactions', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.stop();
  });

  async function ask(questions: Question[] = [fileQuestion, tokenQuestion]) {
    const live = await runningRun(h.nc);
    const interaction = await request(h.nc, rpc.runs.interactionCreate, {
      run_id: live.run.id,
      attempt: live.attempt,
      claim_id: live.claim_id,
      key: uniqueId('req'),
      kind: 'question',
      questions,
    });
    return { ...live, interaction };
  }

  it('raises an interaction: the run waits for input and the log points at it', async () => {
    const { run, attempt, owner, thread_id, interaction } = await ask();
    expect(interaction).toMatchObject({
      run_id: run.id,
      thread_id,
      kind: 'question',
      status: 'pending',
      answers: {},
      resolvedAt: null,
      cancelledBy: null,
    });
    expect(interaction.id).toMatch(/^int_[0-9a-f]{32}$/);
    expect((await getRun(h, run.id)).status).toBe('waiting_for_input');

    const log = await readLog(h, run.id);
    expect(log.map((e) => e.chunk).slice(-2)).toEqual([
      { type: 'run.status', status: 'waiting_for_input', previous: 'running', attempt },
      { type: 'interaction.requested', interaction_id: interaction.id, kind: 'question' },
    ]);
    expect(await request(h.nc, rpc.runs.interactionGet, { owner_id: owner, interaction_id: interaction.id })).toEqual(
      interaction,
    );
  });

  it('returns the same interaction for a retried create', async () => {
    const live = await runningRun(h.nc);
    const req = {
      run_id: live.run.id,
      attempt: live.attempt,
      claim_id: live.claim_id,
      key: 'call_1',
      kind: 'plan_approval' as const,
      questions: [fileQuestion],
    };
    const first = await request(h.nc, rpc.runs.interactionCreate, req);
    const again = await request(h.nc, rpc.runs.interactionCreate, req);
    expect(again).toEqual(first);
    const log = await readLog(h, live.run.id);
    expect(log.filter((e) => (e.chunk as { type: string }).type === 'interaction.requested')).toHaveLength(1);
    expect(
      (await failure(request(h.nc, rpc.runs.interactionCreate, { ...req, key: 'call_2', attempt: live.attempt + 1 })))
        .code,
    ).toBe('already_settled');
  });

  it('logs the question before its answer when the answer comes before the question is logged', async () => {
    // The interaction is readable from its insert, its owner may answer before the request is logged.
    const live = await runningRun(h.nc);
    const req = {
      run_id: live.run.id,
      attempt: live.attempt,
      claim_id: live.claim_id,
      key: 'call_cut_short',
      kind: 'question' as const,
      questions: [fileQuestion],
    };
    // What a create cut short after its insert leaves: the interaction, its request not logged.
    const raised = { id: `int_${randomBytes(16).toString('hex')}` };
    await h.interactions.interactions.insertOne({
      _id: raised.id,
      run_id: live.run.id,
      thread_id: live.thread_id,
      owner_id: live.owner,
      key: req.key,
      kind: req.kind,
      questions: req.questions,
      status: 'pending',
      answers: {},
      cancelled_by: null,
      created_at: new Date(),
      resolved_at: null,
      announced: false,
    });

    await request(h.nc, rpc.runs.interactionAnswer, {
      owner_id: live.owner,
      interaction_id: raised.id,
      request: { action: 'answer', answers: { file: { kind: 'options', optionIds: ['README.md'] } } },
    });
    // The runner's retry of the create logs nothing twice.
    expect(await request(h.nc, rpc.runs.interactionCreate, req)).toMatchObject({ id: raised.id, status: 'answered' });
    const chunks = (await readLog(h, live.run.id)).map((e) => e.chunk as { type: string; interaction_id?: string });
    const ofIt = chunks.filter((c) => c.interaction_id === raised.id).map((c) => c.type);
    expect(ofIt).toEqual(['interaction.requested', 'interaction.settled']);
  });

  it('refuses the same key with other questions: an answer given to the first is not the second’s', async () => {
    const live = await runningRun(h.nc);
    const req = {
      run_id: live.run.id,
      attempt: live.attempt,
      claim_id: live.claim_id,
      key: 'call_plan',
      kind: 'plan_approval' as const,
      questions: [{ ...fileQuestion, id: 'plan', question: 'Plan A', options: [] }],
    };
    await request(h.nc, rpc.runs.interactionCreate, req);
    const other = { ...req, questions: [{ ...req.questions[0]!, question: 'Plan B' }] };
    expect((await failure(request(h.nc, rpc.runs.interactionCreate, other))).code).toBe('idempotency_conflict');
    expect((await failure(request(h.nc, rpc.runs.interactionCreate, { ...req, kind: 'question' as const }))).code).toBe(
      'idempotency_conflict',
    );
  });

  it('settles exactly once under 10 concurrent answers and resumes the run', async () => {
    const { run, owner, interaction, claim_id } = await ask([fileQuestion]);
    const signals = h.nc.subscribe(subjects.runSignal(run.id), { max: 1 });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        request(h.nc, rpc.runs.interactionAnswer, {
          owner_id: owner,
          interaction_id: interaction.id,
          request: {
            action: 'answer',
            answers: { file: { kind: 'options', optionIds: [i % 2 ? 'README.md' : 'NOTES.md'] } },
          },
        }),
      ),
    );
    const won = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    expect(won).toHaveLength(1);
    for (const o of outcomes) {
      if (o.status === 'rejected') expect(o.reason).toMatchObject({ code: 'already_settled' });
    }
    expect(won[0]).toMatchObject({ interactionId: interaction.id, status: 'answered', cancelledBy: null });
    for await (const msg of signals) {
      expect(RunSignal.parse(decodeJson(msg.data))).toEqual({ type: 'interaction', interaction_id: interaction.id });
    }

    expect((await getRun(h, run.id)).status).toBe('running');
    const settlement = await request(h.nc, rpc.runs.interactionSettlement, {
      run_id: run.id,
      claim_id,
      interaction_id: interaction.id,
    });
    expect(settlement.answers).toEqual(won[0]!.answers);
    const log = await readLog(h, run.id);
    expect(log.filter((e) => (e.chunk as { type: string }).type === 'interaction.settled').map((e) => e.chunk)).toEqual(
      [{ type: 'interaction.settled', interaction_id: interaction.id, status: 'answered' }],
    );
    expect(await statusLog(h, run.id)).toEqual(['queued', 'starting', 'running', 'waiting_for_input', 'running']);

    const late = await failure(
      request(h.nc, rpc.runs.interactionAnswer, {
        owner_id: owner,
        interaction_id: interaction.id,
        request: { action: 'cancel' },
      }),
    );
    expect(late.code).toBe('already_settled');
  });

  it('redacts secret answers everywhere but in the runner settlement', async () => {
    const { run, owner, thread_id, interaction, claim_id } = await ask();
    const result = await request(h.nc, rpc.runs.interactionAnswer, {
      owner_id: owner,
      interaction_id: interaction.id,
      request: {
        action: 'answer',
        answers: { file: { kind: 'options', optionIds: ['README.md'] }, token: { kind: 'text', text: 'tok-s3cret' } },
      },
    });
    const publicAnswers = { file: { kind: 'options', optionIds: ['README.md'] }, token: { kind: 'redacted' } };
    expect(result.answers).toEqual(publicAnswers);
    expect(Date.parse(result.resolvedAt)).not.toBeNaN();

    const got = await request(h.nc, rpc.runs.interactionGet, { owner_id: owner, interaction_id: interaction.id });
    expect(got).toMatchObject({ status: 'answered', answers: publicAnswers, resolvedAt: result.resolvedAt });
    const list = await request(h.nc, rpc.runs.interactionList, { owner_id: owner, thread_id });
    expect(list.interactions.map((i) => i.answers)).toEqual([publicAnswers]);
    expect(JSON.stringify([got, list])).not.toContain('tok-s3cret');

    const settlement = await request(h.nc, rpc.runs.interactionSettlement, {
      run_id: run.id,
      claim_id,
      interaction_id: interaction.id,
    });
    expect(settlement.interaction.answers).toEqual(publicAnswers);
    expect(settlement.answers).toEqual({
      file: { kind: 'options', optionIds: ['README.md'] },
      token: { kind: 'text', text: 'tok-s3cret' },
    });
  });

  it('lets the user cancel an interaction', async () => {
    const { run, owner, interaction } = await ask([fileQuestion]);
    const result = await request(h.nc, rpc.runs.interactionAnswer, {
      owner_id: owner,
      interaction_id: interaction.id,
      request: { action: 'cancel' },
    });
    expect(result).toMatchObject({ status: 'cancelled', cancelledBy: 'user', answers: {} });
    expect((await getRun(h, run.id)).status).toBe('running');
  });

  it('rejects answers that do not fit the questions', async () => {
    const { owner, interaction } = await ask([fileQuestion]);
    const answer = (answers: Record<string, unknown>) =>
      request(h.nc, rpc.runs.interactionAnswer, {
        owner_id: owner,
        interaction_id: interaction.id,
        request: { action: 'answer', answers } as never,
      });
    expect((await failure(answer({ nope: { kind: 'text', text: 'x' } }))).code).toBe('invalid_request');
    expect((await failure(answer({ file: { kind: 'options', optionIds: ['OTHER.md'] } }))).code).toBe(
      'invalid_request',
    );
    expect((await failure(answer({ file: { kind: 'text', text: 'README.md' } }))).code).toBe('invalid_request');
    // Still open after rejected answers.
    expect((await answer({ file: { kind: 'options', optionIds: ['NOTES.md'] } })).status).toBe('answered');
  });

  it('keeps the run waiting until every pending interaction is settled', async () => {
    const { run, attempt, claim_id, owner, thread_id, interaction: first } = await ask([fileQuestion]);
    const second = await request(h.nc, rpc.runs.interactionCreate, {
      run_id: run.id,
      attempt,
      claim_id,
      key: 'second',
      kind: 'plan_approval',
      questions: [{ ...fileQuestion, id: 'approve', options: [{ label: 'yes', description: '' }] }],
    });
    const settle = (id: string) =>
      request(h.nc, rpc.runs.interactionAnswer, { owner_id: owner, interaction_id: id, request: { action: 'cancel' } });

    await settle(first.id);
    expect((await getRun(h, run.id)).status).toBe('waiting_for_input');
    const pending = await request(h.nc, rpc.runs.interactionList, { owner_id: owner, thread_id, status: 'pending' });
    expect(pending.interactions.map((i) => i.id)).toEqual([second.id]);
    const all = await request(h.nc, rpc.runs.interactionList, { owner_id: owner, thread_id });
    expect(all.interactions.map((i) => i.id)).toEqual([first.id, second.id]);

    await settle(second.id);
    expect((await getRun(h, run.id)).status).toBe('running');
  });

  it('cancels pending interactions for the system when the run is cancelled', async () => {
    const { run, attempt, claim_id, owner, interaction } = await ask([fileQuestion]);
    await request(h.nc, rpc.runs.cancel, { owner_id: owner, run_id: run.id });
    await request(h.nc, rpc.runs.transition, { run_id: run.id, attempt, claim_id, to: 'cancelled' });
    const got = await request(h.nc, rpc.runs.interactionGet, { owner_id: owner, interaction_id: interaction.id });
    expect(got).toMatchObject({ status: 'cancelled', cancelledBy: 'system' });
    expect(got.resolvedAt).not.toBeNull();
    const log = await readLog(h, run.id);
    expect(log.at(-1)?.chunk).toMatchObject({ type: 'run.status', status: 'cancelled' });
    expect(log.at(-2)?.chunk).toEqual({
      type: 'interaction.settled',
      interaction_id: interaction.id,
      status: 'cancelled',
    });
  });

  it('hides interactions from other owners', async () => {
    const { owner, thread_id, interaction } = await ask([fileQuestion]);
    expect(
      (await failure(request(h.nc, rpc.runs.interactionGet, { owner_id: 'usr_other', interaction_id: interaction.id })))
        .code,
    ).toBe('not_found');
    expect((await request(h.nc, rpc.runs.interactionList, { owner_id: 'usr_other', thread_id })).interactions).toEqual(
      [],
    );
    expect(
      (
        await failure(
          request(h.nc, rpc.runs.interactionAnswer, {
            owner_id: 'usr_other',
            interaction_id: interaction.id,
            request: { action: 'cancel' },
          }),
        )
      ).code,
    ).toBe('not_found');
    expect(
      (await request(h.nc, rpc.runs.interactionGet, { owner_id: owner, interaction_id: interaction.id })).status,
    ).toBe('pending');
  });

  it('gives the answers only to the runner holding the run that asked', async () => {
    const { run, interaction, claim_id } = await ask([fileQuestion]);
    const other = await runningRun(h.nc);
    const settlement = (req: { run_id: string; claim_id: string; interaction_id: string }) =>
      request(h.nc, rpc.runs.interactionSettlement, req);
    expect((await settlement({ run_id: run.id, claim_id, interaction_id: interaction.id })).interaction.id).toBe(
      interaction.id,
    );
    // Any other claim id, or the holder of another run asking for this run's question: refused.
    const stranger = { run_id: run.id, claim_id: newClaimId(), interaction_id: interaction.id };
    expect((await failure(settlement(stranger))).code).toBe('already_settled');
    const neighbour = { run_id: other.run.id, claim_id: other.claim_id, interaction_id: interaction.id };
    expect((await failure(settlement(neighbour))).code).toBe('not_found');
    const missing = { run_id: run.id, claim_id, interaction_id: 'int_missing' };
    expect((await failure(settlement(missing))).code).toBe('not_found');
    // A newer attempt's claim (its holder fell silent) fences the older one out.
    await silence(h, run.id);
    await request(h.nc, rpc.runs.claim, { run_id: run.id, runner_id: 'runner-b', claim_id: newClaimId() });
    expect((await failure(settlement({ run_id: run.id, claim_id, interaction_id: interaction.id }))).code).toBe(
      'already_settled',
    );
  });
});
