// The scripted agent of demo mode (DESIGN.md section 4b), as a pure function of one Responses API
// request: Codex re-sends the whole conversation each time, so the next step follows from the tool
// results already in it. Each step's call id names the run and the step, which keeps the script on
// track across a steer (a new user message mid-turn) and across the runs of one thread.

export type DemoItem =
  | { type: 'message'; text: string }
  | { type: 'function_call'; call_id: string; name: string; arguments: Record<string, unknown> };

export const DEMO_FILES = ['README.md', 'NOTES.md'] as const;

type Step = 'ask' | 'look' | 'write' | 'append';

interface Parsed {
  runId: string;
  prompt: string;
  plan: boolean;
  outputs: Map<string, string>;
}

const INJECTED =
  /^\s*<(environment_context|user_instructions|permissions|INSTRUCTIONS|collaboration_mode|turn_aborted)/;

export function demoReply(body: Record<string, unknown>): DemoItem[] {
  const req = parse(body);
  const id = (step: Step) => `tw_demo_${req.runId}_${step}`;
  const done = (step: Step) => req.outputs.has(id(step));
  const file = chosenFile(req.outputs.get(id('ask')));

  if (req.plan && !done('ask')) {
    return [
      { type: 'message', text: 'Demo mode (scripted): one question before I change anything.' },
      {
        type: 'function_call',
        call_id: id('ask'),
        name: 'request_user_input',
        arguments: {
          questions: [
            {
              id: 'file',
              header: 'File',
              question: 'Which file should I change?',
              options: [
                { label: 'README.md', description: 'Append a line to the README' },
                { label: 'NOTES.md', description: 'Append a line to NOTES.md (created if missing)' },
              ],
            },
          ],
        },
      },
    ];
  }
  if (!done('look')) {
    return [
      { type: 'message', text: 'Looking around the repository first.' },
      shell(id('look'), 'sleep 3; ls -la; git log --oneline -3'),
    ];
  }
  const demoFile = `threadwork-demo-${req.runId}.md`;
  if (!done('write')) {
    const lines = [
      '# Threadwork demo',
      '',
      `Run \`${req.runId}\` was asked:`,
      '',
      ...req.prompt.split('\n').map((l) => `> ${l}`),
    ];
    return [shell(id('write'), applyPatchAdd(demoFile, lines))];
  }
  if (!done('append')) {
    const line = `Threadwork demo run ${req.runId} was here (scripted).`;
    return [shell(id('append'), `printf '%s\\n' ${quote(line)} >> ${quote(file)}`)];
  }
  return [
    {
      type: 'message',
      text:
        'This reply is scripted: Threadwork runs in demo mode (THREADWORK_DEMO=1), so no model was asked. ' +
        `I looked around the repository (\`ls -la\`, \`git log\`), created \`${demoFile}\` with your prompt and ` +
        `appended a line to \`${file}\`; the change is committed on the thread branch. ` +
        'Set MODEL_BASE_URL and MODEL_API_KEY to run a real agent.',
    },
  ];
}

function shell(callId: string, cmd: string): DemoItem {
  return { type: 'function_call', call_id: callId, name: 'exec_command', arguments: { cmd } };
}

/** Codex turns an `apply_patch` heredoc into a file change of its own (a `fileChange` item). */
function applyPatchAdd(path: string, lines: string[]): string {
  const body = lines.map((l) => `+${l}`);
  return [
    "apply_patch <<'THREADWORK_PATCH'",
    '*** Begin Patch',
    `*** Add File: ${path}`,
    ...body,
    '*** End Patch',
    'THREADWORK_PATCH',
  ].join('\n');
}

function quote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

/** The option the user picked, read from the question's tool result; README.md when there was none. */
function chosenFile(output: string | undefined): string {
  if (output) {
    for (const name of DEMO_FILES) if (output.includes(`"${name}"`)) return name;
  }
  return 'README.md';
}

function parse(body: Record<string, unknown>): Parsed {
  const input = Array.isArray(body.input) ? (body.input as Record<string, unknown>[]) : [];
  let prompt = '';
  let plan = false;
  const outputs = new Map<string, string>();
  for (const item of input) {
    if (item.type === 'message') {
      const text = textOf(item.content);
      if (item.role === 'developer' && text.includes('<collaboration_mode># Plan Mode')) plan = true;
      if (item.role === 'user' && text && !INJECTED.test(text) && !text.startsWith('# AGENTS.md')) prompt = text;
    } else if (item.type === 'function_call_output' && typeof item.call_id === 'string') {
      outputs.set(item.call_id, typeof item.output === 'string' ? item.output : JSON.stringify(item.output));
    }
  }
  return { runId: runIdOf(body), prompt, plan, outputs };
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Record<string, unknown>[]).map((c) => (typeof c.text === 'string' ? c.text : '')).join('\n');
}

/** The runner passes the run id as turn metadata, which Codex forwards in `client_metadata`. */
function runIdOf(body: Record<string, unknown>): string {
  const meta = body.client_metadata as Record<string, unknown> | undefined;
  const turn = meta?.['x-codex-turn-metadata'];
  if (typeof turn === 'string') {
    try {
      const parsed = JSON.parse(turn) as Record<string, unknown>;
      if (typeof parsed.threadwork_run_id === 'string') return parsed.threadwork_run_id.replace(/[^A-Za-z0-9_-]/g, '_');
    } catch {
      // Not JSON: fall through.
    }
  }
  return 'unknown';
}
