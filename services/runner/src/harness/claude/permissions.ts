import type { PermissionResult } from '@anthropic-ai/claude-agent-sdk';
import type { Question } from '@threadwork/contracts';
import { cutUtf8 } from '../../domain/text.js';
import type { ClaudeTurn } from './turn.js';

// What a turn answers when Claude Code asks about a tool call (the SDK's canUseTool): the user's
// questions and plan approvals become interactions; every other call is allowed (the jail, not a
// prompt, is what contains the agent).

/** How much of a plan goes into its approval: a plan is a page or two. */
const PLAN_MAX_BYTES = 64 * 1024;
/** What of a question goes to the user: Claude Code's tool asks at most 4, each of 2–4 options. */
const MAX_QUESTIONS = 4;
const MAX_OPTIONS = 8;
const TEXT_MAX_BYTES = 4 * 1024;

/** How long a tool call's message may lag behind the SDK's question about it. */
const CALL_WAIT_MS = 5_000;

/** The agent asks the user: the answers go back keyed by each question's text, as the tool takes them. */
export async function askUser(
  turn: ClaudeTurn,
  toolUseId: string,
  input: Record<string, unknown>,
): Promise<PermissionResult> {
  const asked = questionsOf(input);
  if (asked.length === 0) return { behavior: 'deny', message: 'The question had no questions in it.' };
  const answers = await turn.listener.question(
    toolUseId,
    asked.map(({ question }) => question),
  );
  const given: Record<string, string> = {};
  for (const { question, text } of asked) {
    const answer = answers[question.id];
    if (answer && answer.length > 0) given[text] = answer.join(', ');
  }
  if (Object.keys(given).length === 0) {
    return { behavior: 'deny', message: 'The user did not answer. Carry on without the answer or stop.' };
  }
  return { behavior: 'allow', updatedInput: { ...input, answers: given } };
}

/**
 * The agent asks to leave plan mode with its plan: a plan approval for the user. Approved, `leave`
 * puts the session in the default mode and the turn goes on; rejected, the agent is told why and
 * stays in plan mode.
 */
export async function approvePlan(
  turn: ClaudeTurn,
  toolUseId: string,
  input: Record<string, unknown>,
  leave: () => Promise<void>,
): Promise<PermissionResult> {
  // Claude Code passes the plan file plan mode had the agent write (read inside the jail).
  const given = input.plan ?? (await callOf(turn, toolUseId))?.plan;
  const plan =
    typeof given === 'string' && given.trim() ? cutUtf8(given, PLAN_MAX_BYTES) : '(the agent gave no plan text)';
  const decision = await turn.listener.planApproval(toolUseId, plan);
  if (!decision.approved) {
    const why = decision.comment ? ` The user said: ${decision.comment}` : '';
    return { behavior: 'deny', message: `The user rejected the plan. Revise it.${why}` };
  }
  await leave();
  return { behavior: 'allow', updatedInput: input };
}

/**
 * Tool call `id` as the model made it. The SDK may ask about a call before its message has come
 * through the message loop (both arrive on one stream, handled apart): then it is waited for.
 */
async function callOf(turn: ClaudeTurn, id: string): Promise<Record<string, unknown> | undefined> {
  if (!turn.mapper.call(id)) {
    await new Promise<void>((resolve) => {
      turn.awaitedCalls.set(id, resolve);
      setTimeout(resolve, CALL_WAIT_MS).unref();
    });
  }
  return turn.mapper.call(id)?.input;
}

/** Tells the calls waited for (callOf) that the message loop has seen them. */
export function callsSeen(turn: ClaudeTurn): void {
  for (const [id, seen] of turn.awaitedCalls) {
    if (turn.mapper.call(id)) {
      turn.awaitedCalls.delete(id);
      seen();
    }
  }
}

/**
 * An AskUserQuestion call's questions, as the contract's (ids by position) with their text; what
 * the tool's schema allows and no more (the agent can make the call say anything).
 */
export function questionsOf(input: Record<string, unknown>): { question: Question; text: string }[] {
  const questions = Array.isArray(input.questions) ? (input.questions as Record<string, unknown>[]) : [];
  return questions.slice(0, MAX_QUESTIONS).flatMap((q, index) => {
    if (typeof q.question !== 'string') return [];
    const options = Array.isArray(q.options) ? (q.options as Record<string, unknown>[]) : [];
    return [
      {
        text: q.question,
        question: {
          id: `q${index + 1}`,
          header: typeof q.header === 'string' ? cutUtf8(q.header, TEXT_MAX_BYTES) : '',
          question: cutUtf8(q.question, TEXT_MAX_BYTES),
          // Claude Code lets the user answer in words of their own besides the options.
          isOther: true,
          isSecret: false,
          options: options.slice(0, MAX_OPTIONS).flatMap((o) =>
            typeof o.label === 'string'
              ? [
                  {
                    label: cutUtf8(o.label, TEXT_MAX_BYTES),
                    description: typeof o.description === 'string' ? cutUtf8(o.description, TEXT_MAX_BYTES) : '',
                  },
                ]
              : [],
          ),
        },
      },
    ];
  });
}
