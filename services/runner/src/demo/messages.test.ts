import { describe, expect, it } from 'vitest';
import { messagesReply } from './messages.js';

// Requests as Claude Code sends them, reduced to what the adapter reads: the system text (the
// working directory, plan mode's plan file), user texts among the CLI's reminders, tool results.

const PLAN_FILE = '/home/agent/.claude/plans/quiet-otter.md';
const TOOLS = [{ name: 'Bash' }, { name: 'Write' }, { name: 'AskUserQuestion' }, { name: 'ExitPlanMode' }];

function body(opts: { plan?: boolean; results?: [string, string, boolean?][]; steer?: string }) {
  const system = [
    { type: 'text', text: 'You are Claude Code.' },
    { type: 'text', text: 'Primary working directory: /work/app' },
  ];
  return {
    model: 'demo-scripted',
    stream: true,
    tools: TOOLS,
    system,
    messages: [
      ...(opts.plan
        ? [{ role: 'system', content: `Plan mode is active. Create your plan at ${PLAN_FILE} using the Write tool.` }]
        : []),
      {
        role: 'user',
        content: [
          { type: 'text', text: '<system-reminder>\nAs you answer…\n</system-reminder>' },
          { type: 'text', text: 'Fix it' },
        ],
      },
      ...(opts.steer
        ? [
            {
              role: 'system',
              content: `The user sent a new message while you were working:\n${opts.steer}\n\nThis is how Claude Code surfaces it.`,
            },
          ]
        : []),
      ...(opts.results ?? []).flatMap(([id, text, isError]) => [
        { role: 'assistant', content: [{ type: 'tool_use', id, name: 'Bash', input: {} }] },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: id, content: [{ type: 'text', text }], is_error: isError ?? false },
          ],
        },
      ]),
    ],
  };
}

const run = { runId: 'run_1' };
const tools = (blocks: ReturnType<typeof messagesReply>) =>
  blocks.flatMap((b) => (b.type === 'tool_use' ? [`${b.name} ${b.id}`] : []));

describe('the demo script over the Messages API', () => {
  it('in plan mode asks, writes the plan file, leaves plan mode, then looks, writes, appends and sums up', () => {
    const ask = messagesReply(body({ plan: true }), run);
    expect(tools(ask)).toEqual(['AskUserQuestion toolu_tw_demo_run_1_ask']);
    expect(ask[1]).toMatchObject({
      input: {
        questions: [
          {
            question: 'Which file should I change?',
            header: 'File',
            options: [{ label: 'README.md' }, { label: 'NOTES.md' }],
            multiSelect: false,
          },
        ],
      },
    });
    const answered: [string, string][] = [['toolu_tw_demo_run_1_ask', '"Which file should I change?"="NOTES.md"']];
    const plan = messagesReply(body({ plan: true, results: answered }), run);
    expect(tools(plan)).toEqual(['Write toolu_tw_demo_run_1_plan_file']);
    expect(plan[1]).toMatchObject({ input: { file_path: PLAN_FILE, content: expect.stringContaining('NOTES.md') } });
    const planned: [string, string][] = [...answered, ['toolu_tw_demo_run_1_plan_file', 'ok']];
    const exit = messagesReply(body({ plan: true, results: planned }), run);
    expect(exit.at(-1)).toEqual({ type: 'tool_use', id: 'toolu_tw_demo_run_1_plan', name: 'ExitPlanMode', input: {} });

    // Approved: out of plan mode (no plan file in the system text any more).
    const approved: [string, string][] = [...planned, ['toolu_tw_demo_run_1_plan', 'User has approved your plan.']];
    const look = messagesReply(body({ results: approved }), run);
    expect(look.at(-1)).toEqual({
      type: 'tool_use',
      id: 'toolu_tw_demo_run_1_look',
      name: 'Bash',
      input: { command: 'ls -la; git log --oneline -3; sleep 3', description: 'Look around the repository' },
    });
    const looked: [string, string][] = [...approved, ['toolu_tw_demo_run_1_look', 'total 8']];
    expect(messagesReply(body({ results: looked }), run)).toEqual([
      {
        type: 'tool_use',
        id: 'toolu_tw_demo_run_1_write',
        name: 'Write',
        input: {
          file_path: '/work/app/threadwork-demo-run_1.md',
          content: '# Threadwork demo\n\nRun `run_1` was asked:\n\n> Fix it\n',
        },
      },
    ]);
    const wrote: [string, string][] = [...looked, ['toolu_tw_demo_run_1_write', 'File created']];
    expect(messagesReply(body({ results: wrote }), run)).toMatchObject([
      {
        name: 'Bash',
        input: { command: `printf '%s\\n' 'Threadwork demo run run_1 was here (scripted).' >> 'NOTES.md'` },
      },
    ]);
    const done = messagesReply(body({ results: [...wrote, ['toolu_tw_demo_run_1_append', '']] }), run);
    expect(done).toEqual([{ type: 'text', text: expect.stringMatching(/scripted[\s\S]*CLAUDE_BASE_URL/) }]);
  });

  it('stops when the plan is rejected', () => {
    const results: [string, string, boolean?][] = [
      ['toolu_tw_demo_run_1_ask', '"README.md"'],
      ['toolu_tw_demo_run_1_plan_file', 'ok'],
      ['toolu_tw_demo_run_1_plan', 'The user rejected the plan.', true],
    ];
    expect(messagesReply(body({ plan: true, results }), run)).toEqual([
      { type: 'text', text: expect.stringContaining('changed nothing') },
    ]);
  });

  it('goes straight to work in the default mode, takes a steer as the prompt, and keys its steps by run', () => {
    expect(tools(messagesReply(body({}), run))).toEqual(['Bash toolu_tw_demo_run_1_look']);
    // Steps of an earlier run of the session do not count for this one.
    const earlier: [string, string][] = [['toolu_tw_demo_run_1_look', 'ok']];
    expect(tools(messagesReply(body({ results: earlier }), { runId: 'run_2' }))).toEqual([
      'Bash toolu_tw_demo_run_2_look',
    ]);
    const write = messagesReply(body({ results: earlier, steer: 'Do this instead' }), run);
    expect(write).toMatchObject([{ input: { content: expect.stringContaining('> Do this instead') } }]);
  });

  it('names the run unknown when the session has none, and answers a request without tools in text', () => {
    expect(tools(messagesReply(body({}), { runId: null }))).toEqual(['Bash toolu_tw_demo_unknown_look']);
    expect(messagesReply({ model: 'demo-scripted', messages: [{ role: 'user', content: 'hi' }] }, run)).toEqual([
      { type: 'text', text: expect.stringContaining('scripted') },
    ]);
  });
});
