import type { MessageBlock } from '@threadwork/platform';
import { demoActions, safeRunId, shellQuote, type DemoAction, type DemoStep, type StepOutput } from './script.js';

// The demo script over the Anthropic Messages API, as Claude Code speaks it: user texts (less the
// `<system-reminder>` blocks the CLI adds), tool results, plan mode's plan file and the working
// directory in the system text. Claude Code sends no metadata of the client's, so the run comes
// from the session's header (see DemoRuns). Tool use ids name the run and the step, as the call
// ids of the Responses side do.

/** What the adapter reads of one request besides its body. */
export interface MessagesContext {
  /** The run of the request's session, or null when the runner named none. */
  runId: string | null;
}

// Claude Code's own context in user messages, and the marker of an interrupted turn.
const INJECTED =
  /^\s*(<(system-reminder|command-name|command-message|command-args|local-command-stdout|local-command-stderr|user-prompt-submit-hook)>|\[Request interrupted by user)/;

// How Claude Code passes on a message the user sent while the model was working.
const STEER = /^The user sent a new message while you were working:\n([\s\S]*?)\n\nThis is how Claude Code surfaces/;

// Plan mode's system text names the plan file: "…create your plan at /…/plans/<name>.md using…".
const PLAN_FILE = /(\/\S*\/plans\/[^\s/]+\.md)\b/;
const WORKING_DIRECTORY = /Primary working directory: (\S+)/;

const STEPS: readonly DemoStep[] = ['ask', 'plan', 'look', 'write', 'append'];

type Block = Record<string, unknown>;

/** The next blocks of the answer to one Messages request. */
export function messagesReply(body: Record<string, unknown>, context: MessagesContext): MessageBlock[] {
  // A request that offers no tools (a model check) is not a turn of the agent's.
  if (!Array.isArray(body.tools) || body.tools.length === 0) {
    return [{ type: 'text', text: 'Threadwork demo mode: replies are scripted.' }];
  }
  const runId = safeRunId(context.runId ?? 'unknown');
  const id = (step: DemoStep | 'plan_file') => `toolu_tw_demo_${runId}_${step}`;
  const read = readConversation(body);
  const outputs = new Map<DemoStep, StepOutput>();
  for (const step of STEPS) {
    const result = read.results.get(id(step));
    if (result) outputs.set(step, result);
  }
  const actions = demoActions({
    runId,
    prompt: read.prompt,
    plan: read.planFile !== null,
    planApproval: true,
    realModelSettings: 'CLAUDE_BASE_URL and CLAUDE_API_KEY',
    outputs,
  });
  return actions.map((action) => blockOf(action, id, read));
}

interface Conversation {
  prompt: string;
  results: Map<string, StepOutput>;
  planFile: string | null;
  cwd: string | null;
}

function blockOf(action: DemoAction, id: (step: DemoStep | 'plan_file') => string, read: Conversation): MessageBlock {
  const tool = (toolId: string, name: string, input: Record<string, unknown>): MessageBlock => ({
    type: 'tool_use',
    id: toolId,
    name,
    input,
  });
  switch (action.kind) {
    case 'say':
      return { type: 'text', text: action.text };
    case 'ask': {
      const { question, header, options } = action.question;
      return tool(id('ask'), 'AskUserQuestion', { questions: [{ question, header, options, multiSelect: false }] });
    }
    case 'propose_plan':
      // Claude Code proposes what the plan file holds: the plan is written there first.
      if (!read.results.has(id('plan_file')) && read.planFile) {
        return tool(id('plan_file'), 'Write', { file_path: read.planFile, content: action.plan });
      }
      return tool(id('plan'), 'ExitPlanMode', {});
    case 'look':
      // Claude Code refuses a command that begins by sleeping: the wait goes last.
      return bash(id('look'), `${action.command}; sleep ${action.seconds}`, 'Look around the repository');
    case 'create': {
      const content = `${action.lines.join('\n')}\n`;
      if (read.cwd) return tool(id('write'), 'Write', { file_path: `${read.cwd}/${action.path}`, content });
      return bash(
        id('write'),
        `printf '%s' ${shellQuote(content)} > ${shellQuote(action.path)}`,
        'Create the demo file',
      );
    }
    case 'append':
      return bash(
        id('append'),
        `printf '%s\\n' ${shellQuote(action.line)} >> ${shellQuote(action.path)}`,
        `Append a line to ${action.path}`,
      );
  }
}

function bash(toolId: string, command: string, description: string): MessageBlock {
  return { type: 'tool_use', id: toolId, name: 'Bash', input: { command, description } };
}

function readConversation(body: Record<string, unknown>): Conversation {
  const messages = Array.isArray(body.messages) ? (body.messages as Block[]) : [];
  let prompt = '';
  const results = new Map<string, StepOutput>();
  const system: string[] = [blocksText(body.system)];
  for (const message of messages) {
    if (message.role === 'system') {
      const text = blocksText(message.content);
      const steer = STEER.exec(text)?.[1];
      if (steer === undefined) system.push(text);
      else prompt = steer;
    }
    if (message.role !== 'user') continue;
    const typed: string[] = [];
    for (const block of contentBlocks(message.content)) {
      if (block.type === 'tool_result' && typeof block.tool_use_id === 'string') {
        results.set(block.tool_use_id, { text: blocksText(block.content), refused: block.is_error === true });
      } else if (block.type === 'text' && typeof block.text === 'string' && !INJECTED.test(block.text)) {
        typed.push(block.text);
      }
    }
    if (typed.length > 0) prompt = typed.join('\n');
  }
  const systemText = system.join('\n');
  return {
    prompt,
    results,
    planFile: PLAN_FILE.exec(systemText)?.[1] ?? null,
    cwd: WORKING_DIRECTORY.exec(systemText)?.[1] ?? null,
  };
}

function contentBlocks(content: unknown): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? (content as Block[]) : [];
}

function blocksText(content: unknown): string {
  return contentBlocks(content)
    .map((b) => (typeof b.text === 'string' ? b.text : ''))
    .filter((t) => t.length > 0)
    .join('\n');
}
