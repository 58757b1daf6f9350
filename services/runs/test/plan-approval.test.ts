import { rpc, type Question } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { uniqueId } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failure, getRun, type Harness, runningRun, startHarness } from './helpers.js';

// A plan approval: the agent's plan as the one question, answered approve or reject (with an
// optional comment); the options and text of a question interaction are refused there, and
// approve and reject anywhere else.

const planQuestion: Question = {
  id: 'plan',
  header: 'Plan',
  question: '1. Add a CHANGELOG.md\n2. Link it from the README',
  isOther: false,
  isSecret: false,
  options: [],
};
const freeQuestion: Question = { ...planQuestion, id: 'note', header: 'Note', question: 'Anything else?' };

describe('plan approval answers', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(async () => {
    await h?.stop();
  });

  async function raise(kind: 'plan_approval' | 'question', questions: Question[]) {
    const live = await runningRun(h.nc);
    const interaction = await request(h.nc, rpc.runs.interactionCreate, {
      run_id: live.run.id,
      attempt: live.attempt,
      claim_id: live.claim_id,
      key: uniqueId('req'),
      kind,
      questions,
    });
    const answer = (answers: Record<string, unknown>) =>
      request(h.nc, rpc.runs.interactionAnswer, {
        owner_id: live.owner,
        interaction_id: interaction.id,
        request: { action: 'answer', answers } as never,
      });
    const settlement = () =>
      request(h.nc, rpc.runs.interactionSettlement, {
        run_id: live.run.id,
        claim_id: live.claim_id,
        interaction_id: interaction.id,
      });
    return { ...live, interaction, answer, settlement };
  }

  it('takes approve: the interaction is answered, the run resumes and its runner reads the approval', async () => {
    const { run, answer, settlement } = await raise('plan_approval', [planQuestion]);
    expect((await getRun(h, run.id)).status).toBe('waiting_for_input');
    const result = await answer({ plan: { kind: 'approve' } });
    expect(result).toMatchObject({ status: 'answered', answers: { plan: { kind: 'approve' } } });
    expect((await getRun(h, run.id)).status).toBe('running');
    expect((await settlement()).answers).toEqual({ plan: { kind: 'approve' } });
  });

  it('takes reject with a comment, which reaches the runner as given', async () => {
    const { answer, settlement } = await raise('plan_approval', [planQuestion]);
    const reject = { kind: 'reject', text: 'Write the changelog entry for 2.0 only' };
    expect((await answer({ plan: reject })).answers).toEqual({ plan: reject });
    expect((await settlement()).answers).toEqual({ plan: reject });
  });

  it('refuses options, text or an unknown question, and stays open', async () => {
    const { answer } = await raise('plan_approval', [planQuestion]);
    const refused = async (answers: Record<string, unknown>, message: RegExp) => {
      const err = await failure(answer(answers));
      expect(err.code).toBe('invalid_request');
      expect(err.message).toMatch(message);
    };
    await refused({ plan: { kind: 'text', text: 'looks good' } }, /plan approval: answer it with approve or reject/);
    await refused({ plan: { kind: 'options', optionIds: ['yes'] } }, /answer it with approve or reject/);
    await refused({ other: { kind: 'approve' } }, /no question other/);
    // The schema takes a comment bounded like text, and nothing else beside it.
    expect((await failure(answer({ plan: { kind: 'reject', text: 'x'.repeat(4097) } }))).code).toBe('invalid_request');
    expect((await failure(answer({ plan: { kind: 'approve', text: 'why not' } }))).code).toBe('invalid_request');
    expect((await answer({ plan: { kind: 'reject' } })).status).toBe('answered');
  });

  it('refuses approve and reject on a question interaction', async () => {
    const { answer } = await raise('question', [freeQuestion]);
    for (const entry of [{ kind: 'approve' }, { kind: 'reject', text: 'no' }]) {
      const err = await failure(answer({ note: entry }));
      expect(err.code).toBe('invalid_request');
      expect(err.message).toBe('question note takes options or text: approve and reject answer a plan approval');
    }
    expect((await answer({ note: { kind: 'text', text: 'no' } })).status).toBe('answered');
  });
});
