import { rpc, type Question } from '@threadwork/contracts';
import { isAppError } from '@threadwork/platform';
import { callService } from '../clients/call.js';
import { harnessAnswers } from '../domain/outcome.js';
import type { QuestionAnswers } from '../harness/harness.js';
import { pollRun } from './claim.js';
import type { RunState } from './run-state.js';

/**
 * The harness asks: the runs service records the interaction (the run waits for input) and the
 * answer comes back by signal, or by looking again every poll interval in case it was missed.
 * A stop answers nothing (the turn is being interrupted anyway).
 */
export async function ask(run: RunState, key: string, questions: Question[]): Promise<QuestionAnswers> {
  const { nc } = run.deps;
  await run.sink.flush();
  let interactionId: string;
  try {
    const created = await callService(nc, rpc.runs.interactionCreate, {
      run_id: run.job.run_id,
      attempt: run.attempt,
      claim_id: run.claimId,
      key,
      kind: 'question',
      questions,
    });
    interactionId = created.id;
  } catch (err) {
    if (isAppError(err) && err.code === 'already_settled') {
      // The run is being cancelled or was taken over; the poll tells which.
      void pollRun(run);
      return {};
    }
    throw err;
  }
  while (!run.stopReason) {
    try {
      const settlement = await callService(
        nc,
        rpc.runs.interactionSettlement,
        { run_id: run.job.run_id, claim_id: run.claimId, interaction_id: interactionId },
        5_000,
      );
      if (settlement.interaction.status !== 'pending') {
        return harnessAnswers(settlement.interaction.status, settlement.answers);
      }
    } catch (err) {
      run.log.debug({ err }, 'reading the settlement failed; looking again');
    }
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, run.deps.config.RUN_POLL_MS);
      run.wakeQuestion = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    run.wakeQuestion = null;
  }
  return {};
}
