import type { Logger } from '@threadwork/platform';
import type { GateRefusal } from '../sandbox/gates.js';
import type { TurnListener } from './harness.js';

// What a harness session does with a refusal of its jail's gates: a line in the runner's log with
// the run it happened in, and a connection refused out of the sandbox told in the run's events too.

/**
 * How many refusals of one turn become events and log lines each. An agent can be refused thousands
 * of times a second; each would be an event stored in the run's log and a line in the runner's.
 */
export const REFUSALS_REPORTED = 20;

/** The turn a refusal happened in, as reporting it needs it. */
export interface RefusedTurn {
  metadata: Record<string, string>;
  /** Refusals of this turn so far: past REFUSALS_REPORTED, they are counted, not reported one by one. */
  refusals: number;
  listener: Pick<TurnListener, 'chunk'>;
}

export function reportRefusal(refusal: GateRefusal, turn: RefusedTurn | null, sessionId: string, logger: Logger): void {
  const { gate, ...detail } = refusal;
  const count = turn ? ++turn.refusals : 0;
  // Past the first REFUSALS_REPORTED of a turn, one line in a thousand says how many there were.
  if (count > REFUSALS_REPORTED && count % 1000 !== 0) return;
  const last = count === REFUSALS_REPORTED;
  logger.warn(
    {
      run_id: turn?.metadata.threadwork_run_id,
      thread_id: turn?.metadata.threadwork_thread_id,
      session_id: sessionId,
      gate,
      ...detail,
      ...(count >= REFUSALS_REPORTED ? { refusals_this_turn: count } : {}),
    },
    gate === 'egress' ? 'refused a connection out of the sandbox' : 'refused a sandbox request off the model API',
  );
  if (turn && refusal.gate === 'egress' && count <= REFUSALS_REPORTED) {
    const reason = last
      ? `${refusal.reason} (further refusals in this turn are counted, not reported)`
      : refusal.reason;
    turn.listener.chunk({
      type: 'network.refused',
      code: 'egress_denied',
      host: refusal.host,
      port: refusal.port,
      reason,
    });
  }
}
