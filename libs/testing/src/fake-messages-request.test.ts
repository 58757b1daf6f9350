import { describe, expect, it } from 'vitest';
import { parseMessagesRequest } from './fake-messages-request.js';

// What the fake makes of a conversation as Claude Code 2.1 sends it (the shapes below are taken
// from its requests): its reminders are not the user's text, a steer arrives in a system-role
// message, and plan mode names the plan file in the system text.

const reminder = '<system-reminder>\nAttribution for git commits…\n</system-reminder>\n';
const steer = (text: string) =>
  `The user sent a new message while you were working:\n${text}\n\nThis is how Claude Code surfaces messages the user sends mid-turn.`;

describe('parseMessagesRequest', () => {
  it('reads the user texts, steers and tool results of a turn as Claude Code sends them', () => {
    const body = {
      model: 'claude-test',
      system: [{ type: 'text', text: 'You are a Claude agent.' }],
      tools: [{ name: 'Bash' }, { name: 'Write' }],
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: reminder },
            { type: 'text', text: 'make hello' },
          ],
        },
        {
          role: 'system',
          content:
            'Plan mode is active.\nYou should create your plan at /h/.claude/plans/make-hello.md using the Write tool.',
        },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_a', name: 'Bash', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_a', content: 'one' }] },
        { role: 'system', content: [{ type: 'text', text: steer('also do x') }] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_b', name: 'Bash', input: {} }] },
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_b',
              content: [{ type: 'text', text: 'two' }],
              is_error: true,
            },
          ],
        },
      ],
    };
    const req = parseMessagesRequest(JSON.stringify(body), {
      'x-api-key': 'sk-key',
      'x-claude-code-session-id': 'session-1',
    });
    expect(req).toMatchObject({
      lastUserText: 'also do x',
      userTexts: ['make hello', 'also do x'],
      toolResults: [
        { tool_use_id: 'toolu_a', content: 'one', is_error: false },
        { tool_use_id: 'toolu_b', content: 'two', is_error: true },
      ],
      toolResultsSinceLastUser: [{ tool_use_id: 'toolu_b', content: 'two', is_error: true }],
      planFile: '/h/.claude/plans/make-hello.md',
      model: 'claude-test',
      toolNames: ['Bash', 'Write'],
      apiKey: 'sk-key',
      authorization: null,
      sessionId: 'session-1',
    });
    expect(req.system).toContain('You are a Claude agent.');
    expect(req.system).not.toContain('also do x');
  });
});
