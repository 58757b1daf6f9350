import type { Turn, UserInput } from '@threadwork/codex-protocol/v2';
import type { RunError } from '@threadwork/contracts';
import type { TurnListener, TurnOutcome } from '../harness.js';
import type { RefusedTurn } from '../refusals.js';
import type { CodexTurnMapper } from './mapping.js';

// One turn of a Codex session as the session follows it: its id once known, and how it ended.

export interface ActiveTurn extends RefusedTurn {
  listener: TurnListener;
  mapper: CodexTurnMapper;
  turnId: string | null;
  finish(outcome: TurnOutcome): void;
}

/** Records the turn's id the first time it is seen (response or notification) and tells the listener once. */
export function turnBegan(turn: ActiveTurn, id: string): void {
  if (turn.turnId !== null) return;
  turn.turnId = id;
  turn.listener.started();
}

/** A prompt as Codex takes it: one text input. */
export function text(value: string): UserInput {
  return { type: 'text', text: value, text_elements: [] };
}

export function outcomeOf(turn: Turn, mapper: CodexTurnMapper): TurnOutcome {
  const base = { reply: mapper.lastReply, usage: mapper.usage };
  switch (turn.status) {
    case 'completed':
      return { status: 'completed', error: null, ...base };
    case 'interrupted':
      return { status: 'interrupted', error: null, ...base };
    default:
      return { status: 'failed', error: turnError(turn), ...base };
  }
}

/** A failed turn failed in the model loop (HTTP errors, context window, …): `model_error`. */
function turnError(turn: Turn): RunError {
  const info = turn.error?.codexErrorInfo;
  return {
    code: 'model_error',
    message: turn.error?.message ?? 'the turn failed',
    ...(info ? { detail: typeof info === 'string' ? info : JSON.stringify(info) } : {}),
  };
}
