import { describe, expect, it } from 'vitest';
import { responsesReply as demoReply, type DemoItem } from './responses.js';

// Requests as Codex sends them, reduced to what the script reads.
function body(opts: { plan?: boolean; outputs?: [string, string][]; runId?: string }): Record<string, unknown> {
  return {
    client_metadata: { 'x-codex-turn-metadata': JSON.stringify({ threadwork_run_id: opts.runId ?? 'run_1' }) },
    input: [
      ...(opts.plan
        ? [
            {
              type: 'message',
              role: 'developer',
              content: [{ type: 'input_text', text: '<collaboration_mode># Plan Mode' }],
            },
          ]
        : []),
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: '<environment_context>…' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Fix it' }] },
      ...(opts.outputs ?? []).map(([call_id, output]) => ({ type: 'function_call_output', call_id, output })),
    ],
  };
}

const calls = (items: DemoItem[]) => items.flatMap((i) => (i.type === 'function_call' ? [i.call_id] : []));

describe('the demo script over the Responses API', () => {
  it('asks first in plan mode, then looks, writes, appends to the chosen file and sums up', () => {
    expect(calls(demoReply(body({ plan: true })))).toEqual(['tw_demo_run_1_ask']);
    const answered: [string, string][] = [['tw_demo_run_1_ask', '{"answers":{"file":{"answers":["NOTES.md"]}}}']];
    expect(calls(demoReply(body({ plan: true, outputs: answered })))).toEqual(['tw_demo_run_1_look']);
    const looked: [string, string][] = [...answered, ['tw_demo_run_1_look', 'ok']];
    const write = demoReply(body({ plan: true, outputs: looked }));
    expect(JSON.stringify(write)).toContain('*** Add File: threadwork-demo-run_1.md');
    expect(JSON.stringify(write)).toContain('> Fix it');
    const wrote: [string, string][] = [...looked, ['tw_demo_run_1_write', 'ok']];
    expect(JSON.stringify(demoReply(body({ plan: true, outputs: wrote })))).toContain(">> 'NOTES.md'");
    const done = demoReply(body({ plan: true, outputs: [...wrote, ['tw_demo_run_1_append', 'ok']] }));
    expect(done).toHaveLength(1);
    expect(done[0]).toMatchObject({ type: 'message', text: expect.stringContaining('scripted') });
  });

  it('goes straight to work in the default mode, and keys its steps by run', () => {
    expect(calls(demoReply(body({})))).toEqual(['tw_demo_run_1_look']);
    // Steps of an earlier run of the thread do not count for this one.
    expect(calls(demoReply(body({ runId: 'run_2', outputs: [['tw_demo_run_1_look', 'ok']] })))).toEqual([
      'tw_demo_run_2_look',
    ]);
    expect(
      JSON.stringify(
        demoReply(
          body({
            outputs: [
              ['tw_demo_run_1_look', ''],
              ['tw_demo_run_1_write', ''],
            ],
          }),
        ),
      ),
    ).toContain(">> 'README.md'");
  });
});

describe('the Responses items of each step', () => {
  it('asks with request_user_input and looks with a three-second exec_command, as Codex takes them', () => {
    expect(demoReply(body({ plan: true }))[1]).toEqual({
      type: 'function_call',
      call_id: 'tw_demo_run_1_ask',
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
    });
    expect(demoReply(body({}))[1]).toEqual({
      type: 'function_call',
      call_id: 'tw_demo_run_1_look',
      name: 'exec_command',
      arguments: { cmd: 'sleep 3; ls -la; git log --oneline -3' },
    });
  });

  it('names Codex’s settings in the closing reply', () => {
    const outputs: [string, string][] = ['look', 'write', 'append'].map((s) => [`tw_demo_run_1_${s}`, 'ok']);
    expect(demoReply(body({ outputs }))[0]).toMatchObject({ text: expect.stringContaining('MODEL_BASE_URL') });
  });
});
