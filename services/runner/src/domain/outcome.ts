import {
  AnswerEntry,
  PlanAnswerEntry,
  runMovesTo,
  type RunError,
  type RunStatus,
  type TerminalRunStatus,
} from '@threadwork/contracts';
import type { PlanDecision } from '../harness/harness.js';

// Pure decisions at the end of a run: what a turn's outcome means for the run, how to get there
// through the run state machine, and how a settled interaction turns into the harness's answers.

/** Why the runner stopped a turn itself, if it did. */
export type StopReason = 'cancel' | 'timeout' | 'disk_full' | 'fenced' | 'shutdown';

export type TurnStatus = 'completed' | 'interrupted' | 'failed';

export interface Decision {
  to: TerminalRunStatus;
  error?: RunError;
}

/** The run's work is committed (and pushed), but what it produced could not be announced. */
export const REPORT_NOT_PUBLISHED = (subject: string): RunError => ({
  code: 'report_not_published',
  message: `the run's work is committed and its branch pushed, but ${subject} could not be published: review and the thread do not show this run's outcome`,
});

export const TIMEOUT_ERROR = (ms: number): RunError => ({
  code: 'harness_timeout',
  message: `the run did not finish within ${ms} ms`,
});

/** Which bound on disk a sandbox went past; a sandbox that could not be measured counts as past them. */
export type DiskOverrun = { bytes: number } | { inodes: number } | { unmeasured: true };

const DISK_OVERRUN_TEXT = (over: DiskOverrun): string => {
  if ('bytes' in over) return `grew past ${over.bytes} bytes on disk (SANDBOX_DISK_MAX_BYTES)`;
  if ('inodes' in over) return `grew past ${over.inodes} files and directories on disk (SANDBOX_DISK_MAX_INODES)`;
  return 'could not be measured on disk, which counts as past its bounds';
};

export const DISK_FULL_ERROR = (over: DiskOverrun): RunError => ({
  code: 'sandbox_disk_full',
  message: `the sandbox ${DISK_OVERRUN_TEXT(over)}: nothing of this run was committed, and the thread's next run starts from its branch as last pushed`,
});

/** The bounds a run is stopped at. */
export interface RunBounds {
  timeoutMs: number;
  /** The bound on disk the sandbox went past, when it did. */
  disk: DiskOverrun;
}

/**
 * Whether the runner of `attempt` takes over a turn an earlier attempt began: then it must resume
 * that attempt's harness session in the workspace it left (or the run is lost). A run still
 * `starting` when it is claimed again was lost before its turn began — while its sandbox was
 * prepared or its harness started — so nothing of it needs the earlier workspace: the new attempt
 * starts it as a first attempt would.
 */
export function continuesLostTurn(attempt: number, statusAtClaim: RunStatus): boolean {
  return attempt > 0 && statusAtClaim !== 'starting' && statusAtClaim !== 'queued';
}

/**
 * The run's terminal state after its turn ended, given the stop that came while the turn was still
 * going. A cancel that reached the run before its turn ended wins, even over a turn that went on
 * to complete: the user was told `cancelling`, and the harness should have stopped. A turn that
 * completed before any cancel arrived is `completed` (the run had decided; a cancel after that
 * changes nothing), and so is one the timeout caught too late (the work is done). A sandbox that
 * outgrew its bound fails the run whatever the turn did: what it holds is not to be committed.
 */
export function decideOutcome(
  turn: { status: TurnStatus; error: RunError | null },
  stoppedDuringTurn: StopReason | null,
  bounds: RunBounds,
): Decision {
  const stop = stoppedDuringTurn;
  if (stop === 'cancel') return { to: 'cancelled' };
  if (stop === 'disk_full') return { to: 'failed', error: DISK_FULL_ERROR(bounds.disk) };
  if (turn.status === 'completed') return { to: 'completed' };
  if (stop === 'timeout') return { to: 'failed', error: TIMEOUT_ERROR(bounds.timeoutMs) };
  if (turn.status === 'failed') {
    return { to: 'failed', error: turn.error ?? { code: 'harness_error', message: 'the turn failed' } };
  }
  return {
    to: 'failed',
    error: { code: 'harness_interrupted', message: 'the harness interrupted the turn on its own' },
  };
}

/**
 * The moves from `current` to the terminal `target` that the run state machine allows (the
 * fewest, as the table in contracts prefers them): a run still waiting for input goes back to
 * running before it completes, and a cancellation passes through `cancelling`. Null when the
 * runner has no way there: the run has ended, or no runner has started it (`queued`; its claim
 * moves it on first).
 */
export function stepsTo(current: RunStatus, target: TerminalRunStatus): RunStatus[] | null {
  if (current === 'queued') return null;
  return runMovesTo(current, target);
}

/**
 * A settled interaction as the harness wants it: per question, the option labels chosen (option
 * ids are labels) or the text typed. A cancelled interaction gives no answers: the agent is told
 * the user declined and carries on.
 */
export function harnessAnswers(status: string, answers: Record<string, unknown>): Record<string, string[]> {
  if (status !== 'answered') return {};
  const out: Record<string, string[]> = {};
  for (const [questionId, value] of Object.entries(answers)) {
    const parsed = AnswerEntry.safeParse(value);
    if (!parsed.success) continue;
    out[questionId] = parsed.data.kind === 'options' ? parsed.data.optionIds : [parsed.data.text];
  }
  return out;
}

/**
 * What a settled plan approval says: `approve`, or `reject` with the user's comment. Anything else
 * (declined, cancelled, an answer of another kind) is a rejection without one.
 */
export function planDecision(status: string, answers: Record<string, unknown>): PlanDecision {
  if (status !== 'answered') return { approved: false, comment: null };
  const parsed = PlanAnswerEntry.safeParse(answers.plan);
  if (!parsed.success) return { approved: false, comment: null };
  return parsed.data.kind === 'approve' ? { approved: true } : { approved: false, comment: parsed.data.text ?? null };
}
