import type { IncomingHttpHeaders } from 'node:http';

// What a script of the fake Messages API sees of one request: the conversation Claude Code sent,
// reduced to what decides the next answer.

export interface FakeToolResult {
  tool_use_id: string;
  /** The result's text (text blocks of a block list joined). */
  content: string;
  is_error: boolean;
}

/** What a script sees of one request. */
export interface FakeMessagesRequest {
  /** Text of the last user message, text Claude Code injects (`<system-reminder>` …) left out. */
  lastUserText: string;
  /**
   * Every user text of the conversation, oldest first, injected text left out. A message the user
   * sent mid-turn (a steer), which Claude Code passes on inside a system-role message, counts too.
   */
  userTexts: string[];
  /** Every tool result of the conversation, oldest first. */
  toolResults: FakeToolResult[];
  /**
   * Tool results after the last user text (a steer counts as one): how far the current turn has got.
   */
  toolResultsSinceLastUser: FakeToolResult[];
  /** The system prompt: the `system` field and any system-role messages, joined. */
  system: string;
  model: string;
  /**
   * In plan mode, the file Claude Code tells the model to write its plan to (ExitPlanMode shows
   * what that file holds), or null.
   */
  planFile: string | null;
  /** Names of the tools the request offers (deferred ones are only named in the system text). */
  toolNames: string[];
  /** The request body, parsed. */
  body: Record<string, unknown>;
  /** The request body as it arrived. */
  text: string;
  /** The `x-api-key` header (the model key as the endpoint received it), or null. */
  apiKey: string | null;
  /** The `authorization` header (a bearer token, when the client sends one instead), or null. */
  authorization: string | null;
  /** Claude Code's `x-claude-code-session-id` header, or null. */
  sessionId: string | null;
}

// Claude Code puts its own context into user messages as text blocks of their own: reminders
// (attribution, plan mode, changed files), slash-command echoes, and the marker it leaves when a
// turn is interrupted. A script wants what the user typed.
const INJECTED =
  /^\s*(<(system-reminder|command-name|command-message|command-args|local-command-stdout|local-command-stderr|user-prompt-submit-hook)>|\[Request interrupted by user)/;

// How Claude Code passes on a message the user sent while the model was working.
const STEER = /^The user sent a new message while you were working:\n([\s\S]*?)\n\nThis is how Claude Code surfaces/;

// Plan mode's system text names the plan file: "…create your plan at /…/plans/<name>.md using…".
const PLAN_FILE = /(\/\S*\/plans\/[^\s/]+\.md)\b/;

type Block = Record<string, unknown>;

export function parseMessagesRequest(text: string, headers: IncomingHttpHeaders): FakeMessagesRequest {
  const body = JSON.parse(text) as Record<string, unknown>;
  const messages = Array.isArray(body.messages) ? (body.messages as Block[]) : [];
  const userTexts: string[] = [];
  const toolResults: FakeToolResult[] = [];
  let sinceLastUser: FakeToolResult[] = [];
  const system: string[] = [blocksText(body.system)];
  for (const message of messages) {
    if (message.role === 'system') {
      const text = blocksText(message.content);
      const steer = STEER.exec(text)?.[1];
      if (steer === undefined) system.push(text);
      else {
        userTexts.push(steer);
        sinceLastUser = [];
      }
    }
    if (message.role !== 'user') continue;
    const typed: string[] = [];
    for (const block of contentBlocks(message.content)) {
      if (block.type === 'tool_result') {
        const result = {
          tool_use_id: String(block.tool_use_id),
          content: blocksText(block.content),
          is_error: block.is_error === true,
        };
        toolResults.push(result);
        sinceLastUser.push(result);
      } else if (block.type === 'text' && typeof block.text === 'string' && !INJECTED.test(block.text)) {
        typed.push(block.text);
      }
    }
    if (typed.length > 0) {
      userTexts.push(typed.join('\n'));
      sinceLastUser = [];
    }
  }
  const tools = Array.isArray(body.tools) ? (body.tools as Block[]) : [];
  const systemText = system.filter((t) => t.length > 0).join('\n');
  return {
    lastUserText: userTexts.at(-1) ?? '',
    userTexts,
    toolResults,
    toolResultsSinceLastUser: sinceLastUser,
    system: systemText,
    planFile: PLAN_FILE.exec(systemText)?.[1] ?? null,
    model: typeof body.model === 'string' ? body.model : '',
    toolNames: tools.map((t) => String(t.name)),
    body,
    text,
    apiKey: header(headers['x-api-key']),
    authorization: header(headers.authorization),
    sessionId: header(headers['x-claude-code-session-id']),
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

function header(value: string | string[] | undefined): string | null {
  return (Array.isArray(value) ? value[0] : value) ?? null;
}
