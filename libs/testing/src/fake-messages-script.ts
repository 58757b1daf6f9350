import type { FakeMessagesBlock, FakeMessagesReply, FakeMessagesRequest, FakeMessagesScript } from './fake-messages.js';
import { scriptOfPrompt, stepOfTurn } from './fake-script.js';

// Building blocks of scripts for the fake Messages API: Claude Code's own tools with the inputs
// its tool schemas take (as offered in the request's `tools`, and in the agent SDK's
// `sdk-tools.d.ts`). Exported from the package as the namespace `claude`, beside the Codex ones.

/** The assistant says `text`. */
export function say(text: string): FakeMessagesBlock {
  return { type: 'text', text };
}

/** Calls any tool by name. */
export function toolUse(name: string, input: Record<string, unknown>): FakeMessagesBlock {
  return { type: 'tool_use', name, input };
}

/** Runs `command` through the Bash tool. */
export function bash(command: string, description = 'Run a command'): FakeMessagesBlock {
  return toolUse('Bash', { command, description });
}

/** Writes a whole file with the Write tool (`path` absolute, as the tool requires). */
export function write(path: string, content: string): FakeMessagesBlock {
  return toolUse('Write', { file_path: path, content });
}

/**
 * Replaces `oldString` by `newString` in a file with the Edit tool. Claude Code refuses to edit a
 * file it has not read (or written) in the conversation, so a script reads it first.
 */
export function edit(path: string, oldString: string, newString: string, replaceAll = false): FakeMessagesBlock {
  return toolUse('Edit', {
    file_path: path,
    old_string: oldString,
    new_string: newString,
    ...(replaceAll ? { replace_all: true } : {}),
  });
}

/** Reads a file with the Read tool. */
export function read(path: string): FakeMessagesBlock {
  return toolUse('Read', { file_path: path });
}

export interface FakeTodo {
  content: string;
  status: 'pending' | 'in_progress' | 'completed';
  activeForm: string;
}

/** Sets the plan with the TodoWrite tool (offered only when the CLI enables it). */
export function todos(items: readonly FakeTodo[]): FakeMessagesBlock {
  return toolUse('TodoWrite', { todos: items });
}

export interface FakeClaudeQuestion {
  question: string;
  /** A chip of at most 12 characters. */
  header: string;
  /** Two to four options. */
  options: { label: string; description: string }[];
  multiSelect?: boolean;
}

/** Asks the user one to four questions with the AskUserQuestion tool. */
export function askUserQuestion(questions: readonly FakeClaudeQuestion[]): FakeMessagesBlock {
  return toolUse('AskUserQuestion', {
    questions: questions.map((q) => ({ ...q, multiSelect: q.multiSelect ?? false })),
  });
}

/**
 * Writes `plan` to the plan file plan mode names in the request: Claude Code proposes what that
 * file holds when the model calls ExitPlanMode, so a script writes it first.
 */
export function writePlan(req: FakeMessagesRequest, plan: string): FakeMessagesBlock {
  if (!req.planFile) throw new Error('the request names no plan file: is Claude Code in plan mode?');
  return write(req.planFile, plan);
}

/**
 * Leaves plan mode with the ExitPlanMode tool. Claude Code takes the plan from the plan file (see
 * `writePlan`) and drops the tool's input; `plan` goes along for clients that read it there.
 */
export function exitPlanMode(plan?: string): FakeMessagesBlock {
  return toolUse('ExitPlanMode', plan === undefined ? {} : { plan });
}

/**
 * A script that plays `steps` in order within a turn: step n answers the request that carries n
 * tool results since the last user text. Past the last step it repeats the last one. A step may be
 * a script of its own, for an answer that depends on the request (`writePlan`).
 */
export function turnScript(steps: readonly (FakeMessagesReply | FakeMessagesScript)[]): FakeMessagesScript {
  return (req) => {
    const step = stepOfTurn(steps, req.toolResultsSinceLastUser.length);
    return typeof step === 'function' ? step(req) : step;
  };
}

/**
 * One script per prompt prefix: the newest user text that starts with a registered prefix picks
 * the script (so a follow-up without a prefix of its own continues its thread's script).
 */
export function scriptsByPrompt(scripts: ReadonlyMap<string, FakeMessagesScript>): FakeMessagesScript {
  return (req) =>
    scriptOfPrompt(scripts, req.userTexts)?.(req) ?? [say(`no script for ${JSON.stringify(req.lastUserText)}`)];
}
