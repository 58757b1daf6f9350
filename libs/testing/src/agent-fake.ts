import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as codex from './fake-model.js';
import {
  startFakeMessages,
  type FakeMessagesBlock,
  type FakeMessagesReply,
  type FakeMessagesRequest,
} from './fake-messages.js';
import * as claude from './fake-messages-script.js';
import { scriptOfPrompt, stepOfTurn } from './fake-script.js';

// One script for either harness: what the agent does, in words both have (say, run a command,
// write a file, ask, leave plan mode), played by the fake model of the harness's own API — the
// fake Responses API for Codex, the fake Messages API for Claude Code. A test written against it
// runs the real binary of each harness from one table of cases.

export const HARNESS_NAMES = ['codex', 'claude-code'] as const;
export type HarnessName = (typeof HARNESS_NAMES)[number];

export interface AgentQuestion {
  id: string;
  header: string;
  question: string;
  options: { label: string; description: string }[];
}

/** What the agent does in one model response. */
export type AgentAction =
  | { type: 'say'; text: string }
  | { type: 'shell'; command: string }
  /** Writes a new file, `path` relative to the workspace. */
  | { type: 'write'; path: string; content: string }
  | { type: 'ask'; question: AgentQuestion }
  /** Proposes `plan` and asks to leave plan mode (Claude Code's ExitPlanMode; Codex has none). */
  | { type: 'plan'; plan: string };

export const say = (text: string): AgentAction => ({ type: 'say', text });
export const shell = (command: string): AgentAction => ({ type: 'shell', command });
export const write = (path: string, content: string): AgentAction => ({ type: 'write', path, content });
export const ask = (question: AgentQuestion): AgentAction => ({ type: 'ask', question });
export const proposePlan = (plan: string): AgentAction => ({ type: 'plan', plan });

/** Actions, or actions held `delayMs` before the response completes, or an HTTP error. */
export type AgentReply =
  readonly AgentAction[] | { actions: readonly AgentAction[]; delayMs: number } | { status: number; message?: string };

/** What a script sees of a request, the same for both APIs. */
export interface AgentRequest {
  lastUserText: string;
  /** Every user text of the conversation, oldest first (a steer counts as one). */
  userTexts: string[];
  /** What the tools called since the user last spoke gave back, oldest first. */
  outputsSinceLastUser: string[];
  /** The model key as the endpoint received it. */
  key: string | null;
  /** Whether the harness told the model it is in plan mode. */
  planMode: boolean;
}

/** A reply, or one that comes when the test lets it (a script may wait on the test's own gates). */
export type AgentScript = (req: AgentRequest) => AgentReply | Promise<AgentReply>;

export interface AgentFake {
  harness: HarnessName;
  /** The endpoint, as the runner's setting for this harness takes it. */
  baseUrl: string;
  requests: AgentRequest[];
  /** Runner settings that point this harness at the fake with `key` as its model key. */
  runnerEnv(key: string): Record<string, string>;
  close(): Promise<void>;
}

/** Step n of a turn answers the request with n tool outputs since the user last spoke. */
export function agentTurn(steps: readonly (AgentReply | AgentScript)[]): AgentScript {
  return (req) => {
    const step = stepOfTurn(steps, req.outputsSinceLastUser.length);
    return typeof step === 'function' ? step(req) : step;
  };
}

/** The script of the newest user text that starts with a registered prefix. */
export function agentScriptsByPrompt(scripts: ReadonlyMap<string, AgentScript>): AgentScript {
  return (req) =>
    scriptOfPrompt(scripts, req.userTexts)?.(req) ?? [say(`no script for ${JSON.stringify(req.lastUserText)}`)];
}

export async function startAgentFake(harness: HarnessName, script: AgentScript): Promise<AgentFake> {
  const requests: AgentRequest[] = [];
  const seen = (req: AgentRequest) => {
    requests.push(req);
    return script(req);
  };
  if (harness === 'codex') {
    const fake = await codex.startFakeModel(async (native) => toResponses(await seen(fromResponses(native))));
    return {
      harness,
      baseUrl: fake.baseUrl,
      requests,
      runnerEnv: (key) => ({ MODEL_BASE_URL: fake.baseUrl, MODEL_API_KEY: key }),
      close: () => fake.close(),
    };
  }
  const fake = await startFakeMessages(async (native) => toMessages(await seen(fromMessages(native)), native));
  return {
    harness,
    baseUrl: fake.baseUrl,
    requests,
    runnerEnv: (key) => ({ CLAUDE_BASE_URL: fake.baseUrl, CLAUDE_API_KEY: key }),
    close: () => fake.close(),
  };
}

function fromResponses(req: codex.FakeModelRequest): AgentRequest {
  return {
    lastUserText: req.lastUserText,
    userTexts: req.userTexts,
    outputsSinceLastUser: req.toolOutputsSinceLastUser.map((o) => o.output),
    key: req.authorization?.replace(/^Bearer /, '') ?? null,
    planMode: JSON.stringify(req.body.input).includes('Plan Mode'),
  };
}

function toResponses(reply: AgentReply): codex.FakeReply {
  if ('status' in reply) return reply;
  const actions = 'actions' in reply ? reply.actions : reply;
  const items = actions.map((action): codex.FakeReplyItem => {
    switch (action.type) {
      case 'say':
        return codex.say(action.text);
      case 'shell':
        return codex.shell(action.command);
      case 'write':
        return codex.addFile(action.path, action.content);
      case 'ask':
        return codex.askUser([action.question]);
      case 'plan':
        throw new Error('Codex has no plan approval');
    }
  });
  return 'delayMs' in reply ? { items, delayMs: reply.delayMs } : items;
}

function fromMessages(req: FakeMessagesRequest): AgentRequest {
  return {
    lastUserText: req.lastUserText,
    userTexts: req.userTexts,
    outputsSinceLastUser: req.toolResultsSinceLastUser.map((r) => r.content),
    key: req.apiKey ?? req.authorization?.replace(/^Bearer /, '') ?? null,
    planMode: req.planFile !== null,
  };
}

/** The workspace Claude Code works in, as its system text names it. */
const WORKSPACE = /Primary working directory: (\S+)/;

function toMessages(reply: AgentReply, req: FakeMessagesRequest): FakeMessagesReply {
  if ('status' in reply) return reply;
  const actions = 'actions' in reply ? reply.actions : reply;
  const blocks = actions.map((action): FakeMessagesBlock => {
    switch (action.type) {
      case 'say':
        return claude.say(action.text);
      case 'shell':
        return claude.bash(action.command);
      case 'write': {
        const workspace = WORKSPACE.exec(req.system)?.[1];
        if (!workspace) throw new Error('the request names no working directory');
        return claude.write(`${workspace}/${action.path}`, action.content);
      }
      case 'ask': {
        const { question, header, options } = action.question;
        return claude.askUserQuestion([{ question, header, options }]);
      }
      case 'plan':
        // The plan goes along in the call: Claude Code reads plan mode's plan file, which a real
        // model writes first (a step of its own, which would shift this script's steps).
        return claude.exitPlanMode(action.plan);
    }
  });
  return 'delayMs' in reply ? { blocks, delayMs: reply.delayMs } : blocks;
}

/**
 * Whether a sandbox's harness has written `text` into a session file of its own (a Codex rollout,
 * a Claude Code transcript, both `.jsonl` under the sandbox's harness home): what a session resumed
 * after a crash will hold. A harness may ask its model before that turn's record is on disk.
 */
export function recorded(sandboxDir: string, text: string): boolean {
  const home = join(sandboxDir, 'codex-home');
  let names: string[];
  try {
    names = readdirSync(home, { recursive: true, encoding: 'utf8' });
  } catch {
    return false;
  }
  return names
    .filter((name) => name.endsWith('.jsonl'))
    .some((name) => {
      try {
        return readFileSync(join(home, name), 'utf8').includes(text);
      } catch {
        return false; // gone meanwhile, or a directory named *.jsonl
      }
    });
}
