import { demoActions, safeRunId, shellQuote, type DemoAction, type DemoStep, type StepOutput } from './script.js';

// The demo script over the OpenAI Responses API, as Codex speaks it. Each step's call id names the
// run and the step, which keeps the script on track across a steer (a new user message mid-turn)
// and across the runs of one thread.

export type DemoItem =
  | { type: 'message'; text: string }
  | { type: 'function_call'; call_id: string; name: string; arguments: Record<string, unknown> };

const INJECTED =
  /^\s*<(environment_context|user_instructions|permissions|INSTRUCTIONS|collaboration_mode|turn_aborted)/;

const STEPS: readonly DemoStep[] = ['ask', 'plan', 'look', 'write', 'append'];

/** The next output items for one Responses request. */
export function responsesReply(body: Record<string, unknown>): DemoItem[] {
  const runId = runIdOf(body);
  const id = (step: DemoStep) => `tw_demo_${runId}_${step}`;
  const input = Array.isArray(body.input) ? (body.input as Record<string, unknown>[]) : [];
  let prompt = '';
  let plan = false;
  const byCallId = new Map<string, string>();
  for (const item of input) {
    if (item.type === 'message') {
      const text = textOf(item.content);
      if (item.role === 'developer' && text.includes('<collaboration_mode># Plan Mode')) plan = true;
      if (item.role === 'user' && text && !INJECTED.test(text) && !text.startsWith('# AGENTS.md')) prompt = text;
    } else if (item.type === 'function_call_output' && typeof item.call_id === 'string') {
      byCallId.set(item.call_id, typeof item.output === 'string' ? item.output : JSON.stringify(item.output));
    }
  }
  const outputs = new Map<DemoStep, StepOutput>();
  for (const step of STEPS) {
    const text = byCallId.get(id(step));
    if (text !== undefined) outputs.set(step, { text, refused: false });
  }
  const actions = demoActions({
    runId,
    prompt,
    plan,
    planApproval: false,
    realModelSettings: 'MODEL_BASE_URL and MODEL_API_KEY',
    outputs,
  });
  return actions.map((action) => itemOf(action, id));
}

function itemOf(action: DemoAction, id: (step: DemoStep) => string): DemoItem {
  switch (action.kind) {
    case 'say':
      return { type: 'message', text: action.text };
    case 'ask':
      return {
        type: 'function_call',
        call_id: id(action.step),
        name: 'request_user_input',
        arguments: { questions: [action.question] },
      };
    case 'look':
      return shell(id(action.step), `sleep ${action.seconds}; ${action.command}`);
    case 'create':
      return shell(id(action.step), applyPatchAdd(action.path, action.lines));
    case 'append':
      return shell(id(action.step), `printf '%s\\n' ${shellQuote(action.line)} >> ${shellQuote(action.path)}`);
    case 'propose_plan':
      // Codex's plan mode needs no approval (planApproval is false): the script never proposes one.
      return { type: 'message', text: action.plan };
  }
}

function shell(callId: string, cmd: string): DemoItem {
  return { type: 'function_call', call_id: callId, name: 'exec_command', arguments: { cmd } };
}

/** Codex turns an `apply_patch` heredoc into a file change of its own (a `fileChange` item). */
function applyPatchAdd(path: string, lines: string[]): string {
  const body = lines.map((l) => `+${l}`);
  return [
    "apply_patch <<'THREADWORK_PATCH'",
    '*** Begin Patch',
    `*** Add File: ${path}`,
    ...body,
    '*** End Patch',
    'THREADWORK_PATCH',
  ].join('\n');
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return (content as Record<string, unknown>[]).map((c) => (typeof c.text === 'string' ? c.text : '')).join('\n');
}

/** The runner passes the run id as turn metadata, which Codex forwards in `client_metadata`. */
function runIdOf(body: Record<string, unknown>): string {
  const meta = body.client_metadata as Record<string, unknown> | undefined;
  const turn = meta?.['x-codex-turn-metadata'];
  if (typeof turn === 'string') {
    try {
      const parsed = JSON.parse(turn) as Record<string, unknown>;
      if (typeof parsed.threadwork_run_id === 'string') return safeRunId(parsed.threadwork_run_id);
    } catch {
      // Not JSON: fall through.
    }
  }
  return 'unknown';
}
