import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunEventChunk } from '@threadwork/contracts';
import { createLogger } from '@threadwork/platform';
import { claude, startFakeMessages, uniqueId, waitFor, type FakeMessagesServer } from '@threadwork/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localHost } from '../host.js';
import { ResumeFailedError, type HarnessSession, type PlanDecision, type TurnListener } from '../harness.js';
import type { Isolation } from '../../sandbox/isolation.js';
import { ClaudeHarness } from './claude.js';

// The Claude Code adapter on its own, with the real CLI against the fake Messages API and no jail
// (the runner's cases for both harnesses run jailed, in test/harness-*.test.ts): what only this
// adapter does — the key on a descriptor, steers taken after the model's last answer, interrupts
// that keep the process, the plan of plan mode, resuming a conversation.

const KEY = `sk-claude-${uniqueId('key')}`;
const UNJAILED: Isolation = {
  jailed: false,
  codexSandbox: 'danger-full-access',
  egress: { mode: 'none', allow: [] },
  outside: null,
  processes: null,
  memory: null,
  tmpBytes: 0,
  layers: [],
};

let fake: FakeMessagesServer;
let root: string;
let harness: ClaudeHarness;
const sessions: HarnessSession[] = [];

beforeAll(async () => {
  fake = await startFakeMessages(() => [claude.say('nothing scripted')]);
  root = mkdtempSync('/var/tmp/threadwork-claude-adapter-');
  harness = new ClaudeHarness({
    baseUrl: fake.baseUrl,
    apiKey: KEY,
    outputCapBytes: 1 << 20,
    includeRaw: false,
    isolation: UNJAILED,
    logger: createLogger({ service: 'claude-adapter-test', level: 'silent' }),
  });
});
afterAll(async () => {
  await Promise.all(sessions.map((s) => s.stop()));
  await fake.close();
  rmSync(root, { recursive: true, force: true });
});

function sandbox(name: string) {
  const cwd = join(root, name, 'workspace');
  const home = join(root, name, 'harness-home');
  const agentHome = join(root, name, 'home');
  for (const dir of [cwd, home, agentHome]) mkdirSync(dir, { recursive: true });
  return {
    cwd,
    home,
    options: (resumeSessionId: string | null = null) => ({
      cwd,
      home,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: agentHome },
      model: 'claude-test',
      resumeSessionId,
      mounts: { writable: [cwd, home, agentHome], readable: [] },
      owner: null,
      host: localHost(),
    }),
  };
}

async function start(options: Parameters<ClaudeHarness['start']>[0]): Promise<HarnessSession> {
  const session = await harness.start(options);
  sessions.push(session);
  return session;
}

function listener(overrides: Partial<TurnListener> = {}) {
  const chunks: RunEventChunk[] = [];
  const plans: string[] = [];
  let started = false;
  const value: TurnListener = {
    started: () => {
      started = true;
    },
    chunk: (chunk) => chunks.push(chunk),
    question: async () => ({}),
    planApproval: async (_key, plan): Promise<PlanDecision> => {
      plans.push(plan);
      return { approved: true };
    },
    ...overrides,
  };
  return { value, chunks, plans, started: () => started };
}

const turn = (session: HarnessSession, prompt: string, l = listener(), mode: 'default' | 'plan' = 'default') =>
  session.runTurn(
    { prompt, model: 'claude-test', reasoningEffort: 'high', collaborationMode: mode, metadata: {} },
    l.value,
  );

describe('the Claude Code adapter', () => {
  it('hands the model key on a descriptor: the endpoint gets it, the agent’s commands and workspace do not', async () => {
    const box = sandbox('key');
    fake.setScript(claude.turnScript([[claude.bash('env; ls -A')], [claude.say('Looked.')]]));
    const session = await start(box.options());
    const l = listener();
    const outcome = await turn(session, 'show me your environment', l);
    expect(outcome.status).toBe('completed');
    expect(fake.requests.at(-1)?.apiKey).toBe(KEY);
    const output = l.chunks
      .filter((c) => c.type === 'command.output')
      .map((c) => (c as { delta: string }).delta)
      .join('');
    expect(output).toContain('ANTHROPIC_BASE_URL=');
    expect(output).not.toContain(KEY);
    expect(output).not.toContain('ANTHROPIC_API_KEY');
    // Nothing of the harness's own in the workspace the agent's work is committed from.
    expect(readdirSync(box.cwd)).toEqual([]);
  });

  it('takes a steer given while the model writes its last answer into the same turn, and says so', async () => {
    const box = sandbox('steer');
    fake.setScript((req) =>
      req.lastUserText === 'and tests too'
        ? [claude.say('Tests as well, then.')]
        : { blocks: [claude.say('All done, I think…')], delayMs: 3_000 },
    );
    const session = await start(box.options());
    const l = listener();
    const outcome = turn(session, 'write the code', l);
    await waitFor('the model to be writing', () => l.started() && l.chunks.some((c) => c.type === 'message.delta'));
    expect(await session.steer('and tests too')).toBe(true);
    expect(await outcome).toMatchObject({ status: 'completed', reply: { text: 'Tests as well, then.' } });
    expect(fake.requests.at(-1)?.userTexts).toEqual(['write the code', 'and tests too']);
    expect(session.alive).toBe(true);
  });

  it('interrupts a turn and keeps the process for the next one', async () => {
    const box = sandbox('interrupt');
    fake.setScript((req) =>
      req.lastUserText === 'next'
        ? [claude.say('Here again.')]
        : claude.turnScript([[claude.bash('node -e "setTimeout(() => {}, 60000)"')], [claude.say('never')]])(req),
    );
    const session = await start(box.options());
    const l = listener();
    const outcome = turn(session, 'run long', l);
    await waitFor('the command to start', () => l.chunks.some((c) => c.type === 'command.started'));
    await session.interrupt();
    expect((await outcome).status).toBe('interrupted');
    expect(session.alive).toBe(true);
    expect(await turn(session, 'next')).toMatchObject({ status: 'completed', reply: { text: 'Here again.' } });
  });

  it('asks to approve the plan plan mode had the agent write, and goes on once it is approved', async () => {
    const box = sandbox('plan');
    fake.setScript(
      claude.turnScript([
        (req) => [claude.writePlan(req, '# Plan\n1. Add a greeting\n')],
        [claude.exitPlanMode()],
        [claude.write(join(box.cwd, 'greeting.txt'), 'hello\n')],
        [claude.say('Greeted.')],
      ]),
    );
    const session = await start(box.options());
    const l = listener();
    expect(await turn(session, 'plan a greeting', l, 'plan')).toMatchObject({ status: 'completed' });
    expect(l.plans).toEqual(['# Plan\n1. Add a greeting\n']);
    expect(existsSync(join(box.cwd, 'greeting.txt'))).toBe(true);
  });

  it('resumes a stopped session’s conversation in a new process; one it never recorded cannot be resumed', async () => {
    const box = sandbox('resume');
    fake.setScript(() => [claude.say('Noted.')]);
    const first = await start(box.options());
    await turn(first, 'remember the number 7');
    await first.stop();
    const resumed = await start(box.options(first.sessionId));
    expect(resumed.sessionId).toBe(first.sessionId);
    expect(resumed.pid).not.toBe(first.pid);
    await turn(resumed, 'what was the number?');
    expect(fake.requests.at(-1)?.userTexts).toEqual(['remember the number 7', 'what was the number?']);
    // One live session per sandbox, as the runner keeps it: a start clears the state directory the
    // previous process may still be writing to until it has stopped.
    await resumed.stop();

    const never = await harness.start(box.options('0e3a49a4-9c1c-4c8e-9d53-3d0f1f1a5b0b')).catch((err: unknown) => err);
    expect(never).toBeInstanceOf(ResumeFailedError);
    expect((never as ResumeFailedError).neverRecorded).toBe(true);
  });

  it('reads nothing the agent left in its state directory: settings with hooks are gone by the next start', async () => {
    const box = sandbox('planted');
    const marker = join(root, 'planted-hook-ran');
    const config = join(box.home, 'claude');
    mkdirSync(config, { recursive: true });
    const hook = { hooks: [{ type: 'command', command: `touch ${marker}` }] };
    writeFileSync(
      join(config, 'settings.json'),
      JSON.stringify({ hooks: { SessionStart: [hook], UserPromptSubmit: [hook] } }),
    );
    fake.setScript(() => [claude.say('Fine.')]);
    const session = await start(box.options());
    expect((await turn(session, 'hello')).status).toBe('completed');
    expect(existsSync(join(config, 'settings.json'))).toBe(false);
    expect(existsSync(marker)).toBe(false);
  });
});
