import { describe, expect, it } from 'vitest';
import { demoActions, type DemoStep, type DemoView, type StepOutput } from './script.js';

// The script's decisions, whatever the protocol: each view is what an adapter read of a request.

function view(opts: Partial<DemoView> & { done?: [DemoStep, string, boolean?][] } = {}): DemoView {
  const outputs = new Map<DemoStep, StepOutput>(
    (opts.done ?? []).map(([step, text, refused]) => [step, { text, refused: refused ?? false }]),
  );
  return {
    runId: 'run_1',
    prompt: 'Fix it\nplease',
    plan: false,
    planApproval: false,
    realModelSettings: 'SOME_URL and SOME_KEY',
    outputs,
    ...opts,
  };
}

const kinds = (v: DemoView) => demoActions(v).map((a) => a.kind);

describe('the demo script', () => {
  it('in plan mode asks which file first, then looks, creates the demo file, appends and sums up', () => {
    expect(kinds(view({ plan: true }))).toEqual(['say', 'ask']);
    const ask = demoActions(view({ plan: true })).find((a) => a.kind === 'ask');
    expect(ask).toMatchObject({
      question: { question: 'Which file should I change?', options: [{ label: 'README.md' }, { label: 'NOTES.md' }] },
    });
    const answered: [DemoStep, string][] = [['ask', '"Which file should I change?"="NOTES.md"']];
    expect(kinds(view({ plan: true, done: answered }))).toEqual(['say', 'look']);
    expect(demoActions(view({ plan: true, done: answered }))[1]).toMatchObject({ seconds: 3 });
    const create = demoActions(view({ plan: true, done: [...answered, ['look', 'ok']] }));
    expect(create).toEqual([
      {
        kind: 'create',
        step: 'write',
        path: 'threadwork-demo-run_1.md',
        lines: ['# Threadwork demo', '', 'Run `run_1` was asked:', '', '> Fix it', '> please'],
      },
    ]);
    const append = demoActions(view({ plan: true, done: [...answered, ['look', 'ok'], ['write', 'ok']] }));
    expect(append).toEqual([
      { kind: 'append', step: 'append', path: 'NOTES.md', line: 'Threadwork demo run run_1 was here (scripted).' },
    ]);
    const reply = demoActions(
      view({ plan: true, done: [...answered, ['look', 'ok'], ['write', 'ok'], ['append', 'ok']] }),
    );
    expect(reply).toEqual([{ kind: 'say', text: expect.stringMatching(/scripted[\s\S]*SOME_URL and SOME_KEY/) }]);
  });

  it('proposes a plan after the question where plan mode waits for one, and changes nothing when it is rejected', () => {
    const answered: [DemoStep, string][] = [['ask', '"NOTES.md"']];
    const propose = demoActions(view({ plan: true, planApproval: true, done: answered }));
    expect(propose.map((a) => a.kind)).toEqual(['say', 'propose_plan']);
    expect(propose[1]).toMatchObject({ plan: expect.stringContaining('`NOTES.md`') });
    // Approved, the agent is out of plan mode and goes to work.
    expect(kinds(view({ plan: false, planApproval: true, done: [...answered, ['plan', 'ok']] }))).toEqual([
      'say',
      'look',
    ]);
    const rejected = demoActions(view({ plan: true, planApproval: true, done: [...answered, ['plan', 'no', true]] }));
    expect(rejected).toEqual([{ kind: 'say', text: expect.stringContaining('changed nothing') }]);
  });

  it('goes straight to work in the default mode and appends to README.md', () => {
    expect(kinds(view())).toEqual(['say', 'look']);
    expect(
      demoActions(
        view({
          done: [
            ['look', ''],
            ['write', ''],
          ],
        }),
      ),
    ).toMatchObject([{ path: 'README.md' }]);
  });
});
