import { rpc, subjects } from '@threadwork/contracts';
import { decodeJson, publishSignal, request } from '@threadwork/platform';
import { askUser, say, shell, turnScript, uniqueId, type FakeScript } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  admitRun,
  chunks,
  domainOf,
  readLog,
  shape,
  startStack,
  waitFor,
  waitForStatus,
  waitForTerminal,
  type Stack,
} from './helpers.js';

// What a user does to a live run — steer it, cancel it, answer its question — reaching the real
// codex process through the runs service's signals: the edges of each (forged steers, cancels in
// every phase). The cases every harness must pass are in harness-controls and harness-turns.

const STEER_TEXT = 'Actually, please also write tests.';

const scripts = new Map<string, FakeScript>([
  [
    'STEER',
    (req) =>
      req.lastUserText === STEER_TEXT
        ? [say('Adjusted course: writing tests too.')]
        : { items: [say('Working on it…')], delayMs: 20_000 },
  ],
  ['EARLY', turnScript([[shell('sleep 3')], [say('looked around')]])],
  [
    'ASK',
    (req) => {
      const answer = req.toolOutputsSinceLastUser[0];
      if (!answer) {
        return [
          askUser([
            {
              id: 'file',
              header: 'File',
              question: 'Which file should I change?',
              options: [
                { label: 'README.md', description: 'the readme' },
                { label: 'NOTES.md', description: 'the notes' },
              ],
            },
          ]),
        ];
      }
      return [say(`You chose: ${answer.output}`)];
    },
  ],
]);

describe('controls of a live run', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(scripts);
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('gives the harness only a pending steer of its run, with the text its owner sent, and each once', async () => {
    const admitted = await admitRun(stack, 'STEER me while I work (forged ones first)');
    const other = await admitRun(stack, 'ASK me, then wait', { collaboration_mode: 'plan' });
    await waitFor('the model to be asked', () =>
      stack.fake.requests.some((r) => r.lastUserText === 'STEER me while I work (forged ones first)'),
    );
    await waitFor('the turn to stream', async () =>
      shape(await readLog(stack.nc, admitted.run.id)).includes('message.completed'),
    );
    const run = admitted.run.id;
    // A signal carrying its own text (the text is not read from a signal), an unknown control,
    // another run's steer, and one already applied: none reaches the harness.
    publishSignal(stack.nc, subjects.runSignal(run), {
      type: 'steer',
      control_id: uniqueId('ctl_'),
      prompt: STEER_TEXT,
    });
    stack.signalSteer(run, await stack.recordSteer(other, STEER_TEXT));
    stack.signalSteer(run, await stack.recordSteer(admitted, STEER_TEXT, { targetRunId: other.run.id }));
    stack.signalSteer(run, await stack.recordSteer(admitted, STEER_TEXT, { status: 'applied' }));
    // The real one, then a replay of it.
    const real = await stack.recordSteer(admitted, STEER_TEXT);
    stack.signalSteer(run, real);
    stack.signalSteer(run, real);

    expect(await waitForTerminal(stack, run)).toMatchObject({ status: 'completed' });
    expect(domainOf(stack, 'control.applied', run).map((e) => e.data.control_id)).toEqual([real]);
    const applied = chunks(await readLog(stack.nc, run)).filter((c) => c.type === 'control.applied');
    expect(applied.map((c) => c.control_id)).toEqual([real]);
    // The model saw the steer once.
    const steered = stack.fake.requests.filter(
      (r) => r.userTexts[0] === 'STEER me while I work (forged ones first)' && r.userTexts.includes(STEER_TEXT),
    );
    expect(steered.map((r) => r.userTexts)).toEqual([['STEER me while I work (forged ones first)', STEER_TEXT]]);
    await request(stack.nc, rpc.runs.cancel, { owner_id: other.owner, run_id: other.run.id });
    await waitForTerminal(stack, other.run.id);
  });

  it('ignores a steer once the turn has ended (the threads service queues it instead)', async () => {
    const admitted = await admitRun(stack, 'ASK nothing, just wait', { collaboration_mode: 'plan' });
    await waitForStatus(stack, admitted.run.id, ['waiting_for_input']);
    await request(stack.nc, rpc.runs.cancel, { owner_id: admitted.owner, run_id: admitted.run.id });
    await waitForTerminal(stack, admitted.run.id);
    stack.signalSteer(admitted.run.id, await stack.recordSteer(admitted, 'too late'));
    await stack.nc.flush();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(domainOf(stack, 'control.applied', admitted.run.id)).toHaveLength(0);
  });

  /**
   * Admits a run and cancels it the moment its log shows `status` (the live copy of each stored
   * event arrives within milliseconds): the runner is then in the middle of that phase.
   */
  async function cancelWhen(status: string, prompt: string, overrides: Parameters<typeof admitRun>[2] = {}) {
    const owner = uniqueId('owner-');
    let runId: string | undefined;
    let cancelled: Promise<{ requested: boolean }> | undefined;
    const live = stack.nc.subscribe(subjects.runLiveAll, {
      callback: (_err, msg) => {
        if (cancelled || runId === undefined || msg.subject !== subjects.runLive(runId)) return;
        const chunk = (decodeJson(msg.data) as { chunk?: { type?: string; status?: string } }).chunk;
        if (chunk?.type !== 'run.status' || chunk.status !== status) return;
        cancelled = request(stack.nc, rpc.runs.cancel, { owner_id: owner, run_id: runId });
      },
    });
    await stack.nc.flush();
    try {
      const admitted = await admitRun(stack, prompt, { ...overrides, owner_id: owner });
      runId = admitted.run.id;
      const run = await waitForTerminal(stack, admitted.run.id);
      expect(await cancelled).toMatchObject({ requested: true });
      return { admitted, run, log: shape(await readLog(stack.nc, run.id)) };
    } finally {
      live.unsubscribe();
    }
  }

  it('cancels a run while its sandbox is prepared: cancelled, the model never asked', async () => {
    for (let round = 0; round < 3; round++) {
      const prompt = `EARLY cancel while starting ${round}`;
      const { run, log } = await cancelWhen('starting', prompt);
      expect(run.status, `round ${round}`).toBe('cancelled');
      expect(log.filter((t) => t.startsWith('command.'))).toEqual([]);
      expect(stack.fake.requests.filter((r) => r.lastUserText === prompt)).toHaveLength(0);
      expect(log.filter((t) => t === 'run.status:cancelled')).toHaveLength(1);
    }
  });

  it('cancels a run the moment it is running, before its turn is under way: cancelled, no command run', async () => {
    for (let round = 0; round < 3; round++) {
      const prompt = `EARLY cancel while running ${round}`;
      const { run, log } = await cancelWhen('running', prompt);
      expect(run.status, `round ${round}`).toBe('cancelled');
      // The script's command was interrupted (or never began) and the model was not asked again.
      expect(log).not.toContain('command.completed');
      expect(stack.fake.requests.filter((r) => r.lastUserText === prompt).length).toBeLessThanOrEqual(1);
      expect(log.at(-1)).toBe('run.status:cancelled');
    }
  });

  it('cancels a run waiting for an answer: cancelled, its question cancelled by the system', async () => {
    const { admitted, run, log } = await cancelWhen('waiting_for_input', 'ASK me, then be cancelled', {
      collaboration_mode: 'plan',
    });
    expect(run.status).toBe('cancelled');
    expect(log.at(-1)).toBe('run.status:cancelled');
    const { interactions } = await request(stack.nc, rpc.runs.interactionList, {
      owner_id: admitted.owner,
      thread_id: admitted.threadId,
    });
    expect(interactions).toMatchObject([{ status: 'cancelled', cancelledBy: 'system' }]);
    // The question was never answered, so the model never heard back.
    expect(stack.fake.requests.filter((r) => r.lastUserText === 'ASK me, then be cancelled')).toHaveLength(1);
  });
});
