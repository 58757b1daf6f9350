import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MessageCompletedEvent, rpc, type AnswerRequest, type Interaction } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { waitFor } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admitRun,
  domainOf,
  isSubsequence,
  readLog,
  shape,
  startStack,
  waitForTerminal,
  type Admitted,
  type Stack,
} from './helpers.js';

// THREADWORK_DEMO=1: no model endpoint, no key; the scripted demo model plays DESIGN.md section 4b
// through the real codex binary and the real Claude Code CLI, one runner serving both.

const HARNESSES = [
  // Codex's plan mode lets the agent work once the question is answered.
  { harness: 'codex', approvesPlan: false },
  // Claude Code's plan mode is read-only until the user approves a plan.
  { harness: 'claude-code', approvesPlan: true },
] as const;

describe('demo mode', () => {
  let stack: Stack;
  beforeAll(async () => {
    const harnesses = { HARNESSES: 'codex,claude-code' };
    stack = await startStack(new Map(), {
      runner: { THREADWORK_DEMO: '1', MODEL_BASE_URL: undefined, MODEL_API_KEY: undefined, ...harnesses },
      runs: { CODEX_MODEL: 'demo-scripted', CLAUDE_MODEL: 'demo-scripted', ...harnesses },
      threads: harnesses,
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  async function pending(admitted: Admitted, kind: Interaction['kind']): Promise<Interaction> {
    return waitFor(`a pending ${kind} of run ${admitted.run.id}`, async () => {
      const { interactions } = await request(stack.nc, rpc.runs.interactionList, {
        owner_id: admitted.owner,
        thread_id: admitted.threadId,
        status: 'pending',
      });
      return interactions.find((i) => i.run_id === admitted.run.id && i.kind === kind);
    });
  }

  async function settle(admitted: Admitted, interaction: Interaction, answer: AnswerRequest): Promise<void> {
    await request(stack.nc, rpc.runs.interactionAnswer, {
      owner_id: admitted.owner,
      interaction_id: interaction.id,
      request: answer,
    });
  }

  /** Answers the question with NOTES.md; returns the plan approval that follows where there is one. */
  async function answerQuestion(admitted: Admitted, approvesPlan: boolean): Promise<Interaction | null> {
    const question = await pending(admitted, 'question');
    expect(question.questions[0]).toMatchObject({
      question: 'Which file should I change?',
      options: [{ label: 'README.md' }, { label: 'NOTES.md' }],
    });
    const id = question.questions[0]?.id ?? '';
    await settle(admitted, question, {
      action: 'answer',
      answers: { [id]: { kind: 'options', optionIds: ['NOTES.md'] } },
    });
    if (!approvesPlan) return null;
    const approval = await pending(admitted, 'plan_approval');
    expect(approval.questions[0]?.question).toContain('Append a line to `NOTES.md`');
    return approval;
  }

  describe.each(HARNESSES)('with $harness', ({ harness, approvesPlan }) => {
    it('asks which file in plan mode, looks around, writes the demo file, appends a line, and says it is scripted', async () => {
      const prompt = 'Add a friendly note\nwith two lines';
      const admitted = await admitRun(stack, prompt, { collaboration_mode: 'plan', model: undefined, harness });
      expect(admitted.run.model).toBe('demo-scripted');
      const approval = await answerQuestion(admitted, approvesPlan);
      if (approval) await settle(admitted, approval, { action: 'answer', answers: { plan: { kind: 'approve' } } });

      const run = await waitForTerminal(stack, admitted.run.id);
      expect(run.status).toBe('completed');
      const workspace = join(stack.sandboxRoot, admitted.threadId, 'app');
      const demoFile = readFileSync(join(workspace, `threadwork-demo-${run.id}.md`), 'utf8');
      expect(demoFile).toContain('> Add a friendly note\n> with two lines');
      expect(readFileSync(join(workspace, 'NOTES.md'), 'utf8')).toContain(`Threadwork demo run ${run.id} was here`);
      expect(readFileSync(join(workspace, 'README.md'), 'utf8')).toBe('# App\n');

      const log = shape(await readLog(stack.nc, run.id));
      const asked = ['interaction.requested', 'interaction.settled'];
      expect(
        isSubsequence(log, [
          ...asked,
          ...(approvesPlan ? asked : []),
          'command.started',
          'command.completed',
          'file.changed',
          'message.completed',
          'run.status:completed',
        ]),
      ).toBe(true);
      const reply = MessageCompletedEvent.parse(domainOf(stack, 'message.completed', run.id).at(-1)?.data);
      expect(reply.text).toMatch(/scripted/);
      expect(domainOf(stack, 'candidate.produced', run.id)).toHaveLength(1);
    });

    it('goes straight to work in the default mode and appends to README.md', async () => {
      const admitted = await admitRun(stack, 'Just do it', { model: undefined, harness });
      const run = await waitForTerminal(stack, admitted.run.id);
      expect(run.status).toBe('completed');
      const workspace = join(stack.sandboxRoot, admitted.threadId, 'app');
      expect(readFileSync(join(workspace, `threadwork-demo-${run.id}.md`), 'utf8')).toContain('> Just do it');
      expect(readFileSync(join(workspace, 'README.md'), 'utf8')).toContain(`Threadwork demo run ${run.id} was here`);
      expect(shape(await readLog(stack.nc, run.id))).not.toContain('interaction.requested');
    });
  });

  it('with claude-code, changes nothing when the plan is declined', async () => {
    const admitted = await admitRun(stack, 'Plan only', {
      collaboration_mode: 'plan',
      model: undefined,
      harness: 'claude-code',
    });
    const approval = await answerQuestion(admitted, true);
    await settle(admitted, approval!, { action: 'cancel' });

    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('completed');
    const workspace = join(stack.sandboxRoot, admitted.threadId, 'app');
    expect(readFileSync(join(workspace, 'README.md'), 'utf8')).toBe('# App\n');
    const reply = MessageCompletedEvent.parse(domainOf(stack, 'message.completed', run.id).at(-1)?.data);
    expect(reply.text).toMatch(/scripted[\s\S]*changed nothing/);
  });
});
