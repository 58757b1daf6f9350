// The scripted agent of demo mode (DESIGN.md section 4b), as one pure function of what the
// conversation says so far: the agent re-sends the whole conversation on each model call, so the
// next step follows from the steps already done. It knows no protocol: responses.ts (Codex) and
// messages.ts (Claude Code) read their requests into a DemoView and write its actions back out.

export const DEMO_FILES = ['README.md', 'NOTES.md'] as const;

/** The steps of a run, in order; each is done once its tool result is in the conversation. */
export type DemoStep = 'ask' | 'plan' | 'look' | 'write' | 'append';

export interface StepOutput {
  text: string;
  /** The agent refused the step or the user declined it (a rejected plan). */
  refused: boolean;
}

/** What the script reads of a request. */
export interface DemoView {
  runId: string;
  /** The user's latest message. */
  prompt: string;
  /** The run is in plan collaboration mode. */
  plan: boolean;
  /**
   * Plan mode is read-only until the user approves a plan (Claude Code): after the question the
   * agent proposes one. Codex's plan mode lets the agent go on once the question is answered.
   */
  planApproval: boolean;
  /** What to set instead of demo mode for a real model, for the closing reply. */
  realModelSettings: string;
  /** The output of each step done in this run. */
  outputs: ReadonlyMap<DemoStep, StepOutput>;
}

export interface DemoQuestion {
  id: string;
  header: string;
  question: string;
  options: { label: string; description: string }[];
}

export type DemoAction =
  | { kind: 'say'; text: string }
  | { kind: 'ask'; step: 'ask'; question: DemoQuestion }
  | { kind: 'propose_plan'; step: 'plan'; plan: string }
  /** Looks around the repository with `command`, taking about `seconds` (a demo should be watchable). */
  | { kind: 'look'; step: 'look'; command: string; seconds: number }
  | { kind: 'create'; step: 'write'; path: string; lines: string[] }
  | { kind: 'append'; step: 'append'; path: string; line: string };

export const FILE_QUESTION: DemoQuestion = {
  id: 'file',
  header: 'File',
  question: 'Which file should I change?',
  options: [
    { label: 'README.md', description: 'Append a line to the README' },
    { label: 'NOTES.md', description: 'Append a line to NOTES.md (created if missing)' },
  ],
};

export function demoActions(view: DemoView): DemoAction[] {
  const done = (step: DemoStep) => view.outputs.has(step);
  const file = chosenFile(view.outputs.get('ask')?.text);
  const demoFile = `threadwork-demo-${view.runId}.md`;

  if (view.plan && !done('ask')) {
    return [
      { kind: 'say', text: 'Demo mode (scripted): one question before I change anything.' },
      { kind: 'ask', step: 'ask', question: FILE_QUESTION },
    ];
  }
  if (view.plan && view.planApproval && !done('plan')) {
    return [
      { kind: 'say', text: 'Here is the plan; I start once you approve it.' },
      { kind: 'propose_plan', step: 'plan', plan: planText(demoFile, file) },
    ];
  }
  if (view.outputs.get('plan')?.refused) {
    return [
      {
        kind: 'say',
        text:
          'This reply is scripted: Threadwork runs in demo mode (THREADWORK_DEMO=1), so no model was asked. ' +
          'The plan was not approved, so I changed nothing. Send another message to start over.',
      },
    ];
  }
  if (!done('look')) {
    return [
      { kind: 'say', text: 'Looking around the repository first.' },
      { kind: 'look', step: 'look', command: 'ls -la; git log --oneline -3', seconds: 3 },
    ];
  }
  if (!done('write')) {
    const lines = [
      '# Threadwork demo',
      '',
      `Run \`${view.runId}\` was asked:`,
      '',
      ...view.prompt.split('\n').map((l) => `> ${l}`),
    ];
    return [{ kind: 'create', step: 'write', path: demoFile, lines }];
  }
  if (!done('append')) {
    return [
      { kind: 'append', step: 'append', path: file, line: `Threadwork demo run ${view.runId} was here (scripted).` },
    ];
  }
  return [
    {
      kind: 'say',
      text:
        'This reply is scripted: Threadwork runs in demo mode (THREADWORK_DEMO=1), so no model was asked. ' +
        `I looked around the repository (\`ls -la\`, \`git log\`), created \`${demoFile}\` with your prompt and ` +
        `appended a line to \`${file}\`; the change is committed on the thread branch. ` +
        `Set ${view.realModelSettings} to run a real agent.`,
    },
  ];
}

function planText(demoFile: string, file: string): string {
  return [
    '# Demo plan (scripted)',
    '',
    '1. Look around the repository (`ls -la`, `git log`).',
    `2. Create \`${demoFile}\` with your prompt.`,
    `3. Append a line to \`${file}\`.`,
    '',
  ].join('\n');
}

/** The option the user picked, read from the question's tool result; README.md when there was none. */
function chosenFile(output: string | undefined): string {
  if (output) {
    for (const name of DEMO_FILES) if (output.includes(`"${name}"`)) return name;
  }
  return 'README.md';
}

/** A run id as it may appear in a call id and a file name. */
export function safeRunId(runId: string): string {
  return runId.replace(/[^A-Za-z0-9_-]/g, '_');
}

/** Quotes `value` for a POSIX shell. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
