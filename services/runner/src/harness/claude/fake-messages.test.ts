import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { query, type SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import { claude, startFakeMessages, type FakeMessagesServer } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// The real Claude Code CLI (bundled in the agent SDK) against the fake Messages API: the fake's
// stream is one the CLI acts on, and what the fake parses of the CLI's requests (the user's text
// without the CLI's reminders, the tool results, the key and session headers) is what scripts see.

describe('Claude Code against the fake Messages API', () => {
  let fake: FakeMessagesServer;
  let root: string;

  beforeAll(async () => {
    fake = await startFakeMessages(() => [claude.say('nothing scripted')]);
    root = mkdtempSync(join(tmpdir(), 'threadwork-claude-'));
  });
  afterAll(async () => {
    await fake.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('writes a file with the Write tool and finishes the turn', async () => {
    const workspace = join(root, 'workspace');
    const home = join(root, 'home');
    mkdirSync(workspace);
    mkdirSync(home);
    const file = join(workspace, 'hello.txt');
    fake.setScript(
      claude.turnScript([[claude.say('Writing it.'), claude.write(file, 'hello\n')], [claude.say('Done.')]]),
    );

    const messages: SDKMessage[] = [];
    for await (const message of query({
      prompt: 'make hello',
      options: {
        cwd: workspace,
        model: 'claude-test',
        permissionMode: 'bypassPermissions',
        allowDangerouslySkipPermissions: true,
        settingSources: [],
        env: {
          PATH: process.env.PATH,
          HOME: home,
          CLAUDE_CONFIG_DIR: join(home, '.claude'),
          ANTHROPIC_BASE_URL: fake.baseUrl,
          ANTHROPIC_API_KEY: 'sk-fake-claude',
          CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
          IS_SANDBOX: '1',
        },
      },
    })) {
      messages.push(message);
    }

    expect(readFileSync(file, 'utf8')).toBe('hello\n');
    expect(existsSync(file)).toBe(true);
    const result = messages.find((m) => m.type === 'result');
    expect(result).toMatchObject({ subtype: 'success', is_error: false, result: 'Done.' });

    const [first, second] = fake.requests;
    expect(first).toMatchObject({
      lastUserText: 'make hello',
      userTexts: ['make hello'],
      toolResults: [],
      model: 'claude-test',
      apiKey: 'sk-fake-claude',
    });
    expect(first?.sessionId).toBeTruthy();
    expect(first?.toolNames).toEqual(expect.arrayContaining(['Bash', 'Write', 'Edit', 'Read']));
    expect(second?.userTexts).toEqual(['make hello']);
    expect(second?.toolResultsSinceLastUser).toEqual([
      expect.objectContaining({ content: expect.stringContaining(file), is_error: false }),
    ]);
  });
});
