import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MessageCompletedEvent, rpc } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admitRun,
  domainOf,
  isSubsequence,
  readLog,
  shape,
  startStack,
  waitForStatus,
  waitForTerminal,
  type Stack,
} from './helpers.js';

// THREADWORK_DEMO=1: no model endpoint, no key; the scripted demo model plays DESIGN.md section 4b
// through the real codex binary.

describe('demo mode', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(new Map(), {
      runner: { THREADWORK_DEMO: '1', MODEL_BASE_URL: undefined, MODEL_API_KEY: undefined },
      runs: { DEFAULT_MODEL: 'demo-scripted' },
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('asks which file in plan mode, looks around, writes the demo file, appends a line, and says it is scripted', async () => {
    const prompt = 'Add a friendly note\nwith two lines';
    const admitted = await admitRun(stack, prompt, { collaboration_mode: 'plan', model: undefined });
    expect(admitted.run.model).toBe('demo-scripted');
    await waitForStatus(stack, admitted.run.id, ['waiting_for_input']);
    const { interactions } = await request(stack.nc, rpc.runs.interactionList, {
      owner_id: admitted.owner,
      thread_id: admitted.threadId,
      status: 'pending',
    });
    expect(interactions[0]?.questions[0]).toMatchObject({
      question: 'Which file should I change?',
      options: [{ label: 'README.md' }, { label: 'NOTES.md' }],
    });
    await request(stack.nc, rpc.runs.interactionAnswer, {
      owner_id: admitted.owner,
      interaction_id: interactions[0]?.id ?? '',
      request: { action: 'answer', answers: { file: { kind: 'options', optionIds: ['NOTES.md'] } } },
    });

    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('completed');
    const workspace = join(stack.sandboxRoot, admitted.threadId, 'app');
    const demoFile = readFileSync(join(workspace, `threadwork-demo-${run.id}.md`), 'utf8');
    expect(demoFile).toContain('> Add a friendly note\n> with two lines');
    expect(readFileSync(join(workspace, 'NOTES.md'), 'utf8')).toContain(`Threadwork demo run ${run.id} was here`);
    expect(readFileSync(join(workspace, 'README.md'), 'utf8')).toBe('# App\n');

    const log = shape(await readLog(stack.nc, run.id));
    expect(
      isSubsequence(log, [
        'interaction.requested',
        'interaction.settled',
        'command.started',
        'command.completed',
        'file.changed',
        'message.completed',
        'run.status:completed',
      ]),
    ).toBe(true);
    const reply = MessageCompletedEvent.parse(domainOf(stack, 'message.completed', run.id)[0]?.data);
    expect(reply.text).toMatch(/scripted/);
    expect(domainOf(stack, 'candidate.produced', run.id)).toHaveLength(1);
  });

  it('goes straight to work in the default mode and appends to README.md', async () => {
    const admitted = await admitRun(stack, 'Just do it', { model: undefined });
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('completed');
    const workspace = join(stack.sandboxRoot, admitted.threadId, 'app');
    expect(readFileSync(join(workspace, 'README.md'), 'utf8')).toContain(`Threadwork demo run ${run.id} was here`);
    expect(shape(await readLog(stack.nc, run.id))).not.toContain('interaction.requested');
  });
});
