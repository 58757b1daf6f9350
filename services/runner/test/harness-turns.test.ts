import { readFileSync } from 'node:fs';
import { CandidateProducedEvent, rpc } from '@threadwork/contracts';
import { request } from '@threadwork/platform';
import { agent } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admitRun,
  alive,
  chunks,
  domainOf,
  filesUnder,
  git,
  isSubsequence,
  MODEL_KEY,
  readLog,
  shape,
  startAgentStack,
  waitFor,
  waitForStatus,
  waitForTerminal,
  type Admitted,
  type AgentStack,
} from './helpers.js';

// What a run does with each harness, from one table of cases: the real Codex and the real Claude
// Code, each against the fake model of its own API playing the same script.

const { agentTurn, ask, proposePlan, say, shell, write } = agent;

const FILE_QUESTION = {
  id: 'file',
  header: 'File',
  question: 'Which file should I change?',
  options: [
    { label: 'README.md', description: 'the readme' },
    { label: 'NOTES.md', description: 'the notes' },
  ],
};

const scripts = new Map<string, agent.AgentScript>([
  [
    'CREATE',
    agentTurn([
      [say('Looking around first.'), shell('echo hello from the agent; env; ls')],
      [write('src/new.txt', 'hi\nthere\n')],
      [shell("printf 'appended by the agent\\n' >> README.md")],
      [say('Done: created src/new.txt and appended a line to README.md.')],
    ]),
  ],
  [
    'FOLLOW UP',
    agentTurn([[shell('cat src/new.txt && printf "more\\n" >> src/new.txt')], [say('The file is still here.')]]),
  ],
  ['BROKEN MODEL', () => ({ status: 500, message: 'upstream exploded' })],
  ['SLOW MODEL', () => ({ actions: [say('thinking very slowly')], delayMs: 30_000 })],
  ['ASK', agentTurn([[ask(FILE_QUESTION)], (req) => [say(`You chose: ${req.outputsSinceLastUser[0] ?? ''}`)]])],
  [
    'PLAN',
    agentTurn([
      // Rejected, the agent hears why and proposes again; approved, it goes on to do the work.
      (req) => [proposePlan(`Plan ${req.userTexts.length}: append a line to README.md.`)],
      (req) =>
        req.outputsSinceLastUser[0]?.includes('approved')
          ? [shell("printf 'planned\\n' >> README.md")]
          : [proposePlan('Plan, revised: append a line to NOTES.md instead.')],
      (req) =>
        req.outputsSinceLastUser.at(-1)?.includes('approved')
          ? [shell("printf 'planned\\n' >> NOTES.md")]
          : [say('Finished as planned.')],
      [say('Finished as planned.')],
    ]),
  ],
]);

/** What each harness can do of the cases below. */
const CAN_APPROVE_PLANS: Record<agent.HarnessName, boolean> = { codex: false, 'claude-code': true };

describe.each(agent.HARNESS_NAMES)('a run with %s', (harness) => {
  let stack: AgentStack;
  beforeAll(async () => {
    stack = await startAgentStack(harness, scripts);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  let first: Admitted | undefined;

  it('creates a file and runs commands: completed, events in order, candidate = git diff, the key nowhere', async () => {
    const admitted = await admitRun(stack, 'CREATE a file please');
    first = admitted;
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');
    expect(run.harness).toBe(harness);
    expect(run.usage?.inputTokens).toBeGreaterThan(0);
    expect(run.usage?.totalTokens).toBe((run.usage?.inputTokens ?? 0) + (run.usage?.outputTokens ?? 0));

    const events = await readLog(stack.nc, run.id);
    const log = shape(events);
    expect(
      isSubsequence(log, [
        'run.status:running',
        'command.started',
        'command.output',
        'command.completed',
        'file.changed',
        'message.completed',
        'usage',
        'run.status:completed',
      ]),
      log.join(' '),
    ).toBe(true);
    const c = chunks(events);
    expect(c.find((x) => x.type === 'file.changed')).toMatchObject({ path: 'src/new.txt', kind: 'added' });
    expect(c.find((x) => x.type === 'command.completed')).toMatchObject({ exit_code: 0 });
    expect(
      c
        .filter((x) => x.type === 'command.output')
        .map((x) => String(x.delta))
        .join(''),
    ).toContain('hello from the agent');
    // The key reached the model endpoint, and nothing else: not the events, not the agent's `env`.
    expect(stack.agent.requests.at(-1)?.key).toBe(MODEL_KEY);
    expect(JSON.stringify(events)).not.toContain(MODEL_KEY);
    // Nor the sandbox's files: the workspace, the agent's home, the harness's state and conversations.
    for (const file of filesUnder(`${stack.sandboxRoot}/${admitted.threadId}`)) {
      expect(readFileSync(file).includes(MODEL_KEY), file).toBe(false);
    }

    const workspace = `${stack.sandboxRoot}/${admitted.threadId}/app`;
    const head = git(workspace, 'rev-parse', 'HEAD').trim();
    const base = git(workspace, 'rev-parse', 'origin/main').trim();
    const candidate = CandidateProducedEvent.parse(domainOf(stack, 'candidate.produced', run.id)[0]?.data);
    expect(candidate.diff).toBe(git(workspace, 'diff', '--no-color', '-M', base, head));
    expect(candidate.files, JSON.stringify(candidate.files)).toEqual([
      { path: 'README.md', status: 'modified' },
      { path: 'src/new.txt', status: 'added' },
    ]);
  });

  it('continues a follow-up in the same harness session, which still holds the first run', async () => {
    if (!first) throw new Error('the first run did not happen');
    const pid = stack.runner.harnessPids().get(first.threadId);
    expect(pid).toBeDefined();
    const { owner_id, project_id, repositories, thread_id } = first.request;
    const admitted = await admitRun(stack, 'FOLLOW UP on the file', { owner_id, project_id, repositories, thread_id });
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');
    expect(stack.agent.requests.at(-1)?.userTexts).toEqual(['CREATE a file please', 'FOLLOW UP on the file']);
    expect(stack.runner.harnessPids().get(first.threadId)).toBe(pid);
  });

  it('fails the run with model_error when the model answers HTTP 500', async () => {
    const admitted = await admitRun(stack, 'BROKEN MODEL please');
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('failed');
    expect(run.error?.code).toBe('model_error');
    expect(run.error?.message).toBeTruthy();
    const log = shape(await readLog(stack.nc, run.id));
    expect(log.filter((t) => t === 'run.status:failed')).toHaveLength(1);
    expect(log.at(-1)).toBe('run.status:failed');
  });

  it('fails the run with harness_crashed when the harness dies mid-turn', async () => {
    const admitted = await admitRun(stack, 'SLOW MODEL then crash');
    await waitFor('the model to be asked', () =>
      stack.agent.requests.some((r) => r.lastUserText === 'SLOW MODEL then crash'),
    );
    const pid = stack.runner.harnessPids().get(admitted.threadId) as number;
    expect(pid).toBeDefined();
    process.kill(pid, 'SIGKILL');
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status).toBe('failed');
    expect(run.error?.code).toBe('harness_crashed');
    expect(alive(pid)).toBe(false);
  });

  it('asks a question in plan mode, waits for the answer over the API, and gives the model the chosen option', async () => {
    const admitted = await admitRun(stack, 'ASK me which file', { collaboration_mode: 'plan' });
    await waitForStatus(stack, admitted.run.id, ['waiting_for_input']);
    const { interactions } = await request(stack.nc, rpc.runs.interactionList, {
      owner_id: admitted.owner,
      thread_id: admitted.threadId,
      status: 'pending',
    });
    expect(interactions).toHaveLength(1);
    const [interaction] = interactions;
    expect(interaction).toMatchObject({
      kind: 'question',
      questions: [
        {
          header: 'File',
          question: 'Which file should I change?',
          options: [
            { label: 'README.md', description: 'the readme' },
            { label: 'NOTES.md', description: 'the notes' },
          ],
        },
      ],
    });
    expect(stack.agent.requests.find((r) => r.lastUserText === 'ASK me which file')?.planMode).toBe(true);
    const questionId = interaction?.questions[0]?.id ?? '';
    await request(stack.nc, rpc.runs.interactionAnswer, {
      owner_id: admitted.owner,
      interaction_id: interaction?.id ?? '',
      request: { action: 'answer', answers: { [questionId]: { kind: 'options', optionIds: ['NOTES.md'] } } },
    });
    const run = await waitForTerminal(stack, admitted.run.id);
    expect(run.status, JSON.stringify(run.error)).toBe('completed');
    const answered = stack.agent.requests.filter((r) => r.lastUserText === 'ASK me which file').at(-1);
    expect(answered?.outputsSinceLastUser[0]).toContain('NOTES.md');
    expect(
      isSubsequence(shape(await readLog(stack.nc, run.id)), [
        'run.status:waiting_for_input',
        'interaction.requested',
        'interaction.settled',
        'run.status:running',
        'run.status:completed',
      ]),
    ).toBe(true);
  });

  it.runIf(CAN_APPROVE_PLANS[harness])(
    'asks to approve its plan: rejected with a comment, the agent revises it; approved, it carries the plan out',
    async () => {
      const admitted = await admitRun(stack, 'PLAN the change', { collaboration_mode: 'plan' });
      const settle = async (answer: object) => {
        await waitForStatus(stack, admitted.run.id, ['waiting_for_input']);
        const { interactions } = await request(stack.nc, rpc.runs.interactionList, {
          owner_id: admitted.owner,
          thread_id: admitted.threadId,
          status: 'pending',
        });
        expect(interactions).toHaveLength(1);
        const [approval] = interactions;
        await request(stack.nc, rpc.runs.interactionAnswer, {
          owner_id: admitted.owner,
          interaction_id: approval?.id ?? '',
          request: { action: 'answer', answers: { plan: answer } } as never,
        });
        return approval;
      };
      const firstPlan = await settle({ kind: 'reject', text: 'Use NOTES.md, not the README.' });
      expect(firstPlan).toMatchObject({ kind: 'plan_approval', questions: [{ id: 'plan' }] });
      expect(firstPlan?.questions[0]?.question).toContain('append a line to README.md');
      const revised = await settle({ kind: 'approve' });
      expect(revised?.questions[0]?.question).toContain('NOTES.md instead');

      const run = await waitForTerminal(stack, admitted.run.id);
      expect(run.status, JSON.stringify(run.error)).toBe('completed');
      // The rejection's comment reached the model with the refusal.
      const afterReject = stack.agent.requests.find((r) =>
        r.outputsSinceLastUser.some((o) => o.includes('Use NOTES.md, not the README.')),
      );
      expect(afterReject).toBeDefined();
      const workspace = `${stack.sandboxRoot}/${admitted.threadId}/app`;
      expect(git(workspace, 'show', 'HEAD:NOTES.md')).toBe('planned\n');
      const log = shape(await readLog(stack.nc, run.id));
      expect(log.filter((t) => t === 'interaction.requested')).toHaveLength(2);
      expect(log.filter((t) => t === 'interaction.settled')).toHaveLength(2);
    },
  );
});
