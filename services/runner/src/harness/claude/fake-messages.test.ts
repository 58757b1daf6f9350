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

  // The CLI sees only this environment: its config and home in the test's directory, the fake as
  // its API, and nothing that calls home.
  function cliEnv(home: string): Record<string, string | undefined> {
    return {
      PATH: process.env.PATH,
      HOME: home,
      CLAUDE_CONFIG_DIR: join(home, '.claude'),
      ANTHROPIC_BASE_URL: fake.baseUrl,
      ANTHROPIC_API_KEY: 'sk-fake-claude',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      IS_SANDBOX: '1',
    };
  }

  function dirs(name: string): { workspace: string; home: string } {
    const workspace = join(root, name, 'workspace');
    const home = join(root, name, 'home');
    mkdirSync(workspace, { recursive: true });
    mkdirSync(home, { recursive: true });
    return { workspace, home };
  }

  it('writes a file with the Write tool and finishes the turn', async () => {
    const { workspace, home } = dirs('write');
    const file = join(workspace, 'hello.txt');
    fake.setScript(
      claude.turnScript([[claude.say('Writing it.'), claude.write(file, 'hello\n')], [claude.say('Done.')]]),
    );
    const before = fake.requests.length;

    const messages: SDKMessage[] = [];
    for await (const message of query({
      prompt: 'make hello',
      options: {
        cwd: workspace,
        model: 'claude-test',
        permissionMode: 'bypassPermissions',
        allowDangerouslySkipPermissions: true,
        settingSources: [],
        env: cliEnv(home),
      },
    })) {
      messages.push(message);
    }

    expect(existsSync(file)).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe('hello\n');
    const result = messages.find((m) => m.type === 'result');
    expect(result).toMatchObject({ subtype: 'success', is_error: false, result: 'Done.' });

    expect(fake.requests).toHaveLength(before + 2);
    const [first, second] = fake.requests.slice(before);
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

  it('edits the file it wrote and runs a command in the workspace', async () => {
    const { workspace, home } = dirs('edit');
    const file = join(workspace, 'greeting.txt');
    fake.setScript(
      claude.turnScript([
        [claude.write(file, 'hello\n')],
        [claude.edit(file, 'hello', 'hello world')],
        [claude.bash('cat greeting.txt', 'Show the greeting')],
        [claude.say('Edited.')],
      ]),
    );
    const before = fake.requests.length;

    const messages: SDKMessage[] = [];
    for await (const message of query({
      prompt: 'greet the world',
      options: {
        cwd: workspace,
        model: 'claude-test',
        permissionMode: 'bypassPermissions',
        allowDangerouslySkipPermissions: true,
        settingSources: [],
        env: cliEnv(home),
      },
    })) {
      messages.push(message);
    }

    expect(messages.find((m) => m.type === 'result')).toMatchObject({ subtype: 'success', result: 'Edited.' });
    expect(readFileSync(file, 'utf8')).toBe('hello world\n');
    const results = fake.requests.at(-1)?.toolResults ?? [];
    expect(fake.requests).toHaveLength(before + 4);
    expect(results.filter((r) => r.is_error)).toEqual([]);
    expect(results[2]?.content).toBe('hello world');
  });

  it('plans with the todo list, a question and the plan file, then leaves plan mode', async () => {
    const { workspace, home } = dirs('plan');
    const plan = '1. Write hello.txt\n2. Say done\n';
    fake.setScript(
      claude.turnScript([
        [claude.todos([{ content: 'Plan the file', status: 'in_progress', activeForm: 'Planning the file' }])],
        [
          claude.askUserQuestion([
            {
              question: 'Which greeting?',
              header: 'Greeting',
              options: [
                { label: 'hello', description: 'The usual one' },
                { label: 'hi', description: 'A short one' },
              ],
            },
          ]),
        ],
        (req) => [claude.writePlan(req, plan)],
        [claude.exitPlanMode(plan)],
        [claude.say('Planned.')],
      ]),
    );
    const before = fake.requests.length;

    const messages: SDKMessage[] = [];
    for await (const message of query({
      prompt: 'plan hello',
      options: {
        cwd: workspace,
        model: 'claude-test',
        permissionMode: 'plan',
        // TodoWrite is offered only when named (the CLI's default is its task tools).
        tools: ['Bash', 'Read', 'Write', 'Edit', 'TodoWrite', 'AskUserQuestion', 'ExitPlanMode'],
        settingSources: [],
        canUseTool: (name, input) =>
          Promise.resolve({
            behavior: 'allow',
            updatedInput: name === 'AskUserQuestion' ? { ...input, answers: { 'Which greeting?': 'hi' } } : input,
          }),
        env: { ...cliEnv(home), CLAUDE_CODE_ENABLE_TASKS: 'false' },
      },
    })) {
      messages.push(message);
    }

    expect(messages.find((m) => m.type === 'result')).toMatchObject({ subtype: 'success', result: 'Planned.' });
    const requests = fake.requests.slice(before);
    expect(requests).toHaveLength(5);
    const planFile = requests[0]?.planFile;
    expect(planFile).toContain(join(home, '.claude', 'plans'));
    expect(readFileSync(planFile ?? '', 'utf8')).toBe(plan);
    // Every building block's input passed the CLI's own validation of the tool's schema.
    const results = requests.at(-1)?.toolResults ?? [];
    expect(results).toHaveLength(4);
    expect(results.filter((r) => r.is_error)).toEqual([]);
    expect(results[1]?.content).toContain('"Which greeting?"="hi"');
    expect(results[3]?.content).toContain('approved');
  });
});
