import type { SDKMessage, SDKResultMessage } from '@anthropic-ai/claude-agent-sdk';
import type { RunError } from '@threadwork/contracts';
import type { TurnListener, TurnOutcome } from '../harness.js';
import type { RefusedTurn } from '../refusals.js';
import type { ClaudeTurnMapper } from './mapping.js';

// One turn of a Claude Code session as the session follows it. A Threadwork turn is one prompt and
// the steers given while it runs; Claude Code folds a steer into its running turn at the next tool
// result, and one that arrives as its turn ends starts a turn of its own — which is still this one.

export interface ClaudeTurn extends RefusedTurn {
  listener: TurnListener;
  mapper: ClaudeTurnMapper;
  /** The uuid the prompt was pushed with: Claude Code echoes it when it takes the prompt. */
  promptUuid: string;
  started: boolean;
  /** Steers pushed and not yet taken, by uuid: each told whether it was taken. */
  steers: Map<string, (taken: boolean) => void>;
  /** The uuids of every message pushed for the turn, its prompt's and its steers'. */
  sent: Set<string>;
  /** Tool calls the SDK asked about before their message came through, by id. */
  awaitedCalls: Map<string, () => void>;
  /** An interrupt was asked for: the turn ends `interrupted`, whatever it ends with. */
  interrupting: boolean;
  /** Its outcome is known: nothing more goes into it. */
  finished: boolean;
  finish(outcome: TurnOutcome): void;
}

/** How a Claude Code turn ended, from its `result`. */
export function outcomeOf(result: SDKResultMessage, turn: ClaudeTurn): TurnOutcome {
  const base = { reply: turn.mapper.lastReply, usage: turn.mapper.usage };
  if (turn.interrupting) return { status: 'interrupted', error: null, ...base };
  if (result.subtype === 'success' && !result.is_error) return { status: 'completed', error: null, ...base };
  return { status: 'failed', error: resultError(result), ...base };
}

/**
 * An error the model endpoint answered is `model_error` with its HTTP status (Claude Code reports
 * it on the result, and says it in the result's text); anything else of the harness's own is
 * `harness_error`.
 */
function resultError(result: SDKResultMessage): RunError {
  const status = result.subtype === 'success' ? result.api_error_status : undefined;
  const said = result.subtype === 'success' ? result.result : result.errors.join('; ');
  if (typeof status === 'number') {
    return {
      code: 'model_error',
      message: said || `the model endpoint answered HTTP ${status}`,
      detail: `HTTP ${status}`,
    };
  }
  return {
    code: 'harness_error',
    message: said || `Claude Code ended the turn with ${result.subtype}`,
    ...(result.terminal_reason ? { detail: String(result.terminal_reason) } : {}),
  };
}

/** The messages of the client a message of Claude Code's answers or echoes, by uuid. */
export function answering(message: SDKMessage): string[] {
  const uuids: string[] = [];
  if (message.type === 'user' && 'isReplay' in message && message.isReplay && message.uuid) uuids.push(message.uuid);
  const said = message as { user_message_uuid?: unknown; user_message_uuids?: unknown };
  if (typeof said.user_message_uuid === 'string') uuids.push(said.user_message_uuid);
  if (Array.isArray(said.user_message_uuids))
    uuids.push(...said.user_message_uuids.filter((u) => typeof u === 'string'));
  return uuids;
}

export function crashedOutcome(turn: ClaudeTurn | null, message: string): TurnOutcome {
  return {
    status: 'failed',
    error: { code: 'harness_crashed', message },
    reply: turn?.mapper.lastReply ?? null,
    usage: turn?.mapper.usage ?? {},
  };
}
