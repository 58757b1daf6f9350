import { rpc, type InteractionKind, type Question } from '@threadwork/contracts';
import { isAppError } from '@threadwork/platform';
import { callService } from '../clients/call.js';
import { harnessAnswers, planDecision } from '../domain/outcome.js';
import type { PlanDecision, QuestionAnswers } from '../harness/harness.js';
import { pollRun } from './claim.js';
import type { RunState } from './run-state.js';

/** The harness asks the user: the answers it gets (none when the user declined). */
export async function ask(run: RunState, key: string, questions: Question[]): Promise<QuestionAnswers> {
  const settled = await settlement(run, key, 'question', questions);
  return settled ? harnessAnswers(settled.status, settled.answers) : {};
}

/**
 * The harness asks the user to approve its plan: one question whose text is the plan, answered
 * `approve` or `reject` (with a comment). A plan approval declined or never answered is rejected.
 */
export async function approvePlan(run: RunState, key: string, plan: string): Promise<PlanDecision> {
  const question: Question = {
    id: 'plan',
    header: 'Plan',
    question: plan,
    isOther: false,
    isSecret: false,
    options: [],
  };
  const settled = await settlement(run, key, 'plan_approval', [question]);
  return settled ? planDecision(settled.status, settled.answers) : { approved: false, comment: null };
}

/**
 * The runs service records the interaction (the run waits for input) and the answer comes back by
 * signal, or by looking again every poll interval in case it was missed. A stop answers nothing
 * (null: the turn is being interrupted anyway).
 */
async function settlement(
  run: RunState,
  key: string,
  kind: InteractionKind,
  questions: Question[],
): Promise<{ status: string; answers: Record<string, unknown> } | null> {
  const { nc } = run.deps;
  await run.sink.flush();
  let interactionId: string;
  try {
    const created = await callService(nc, rpc.runs.interactionCreate, {
      run_id: run.job.run_id,
      attempt: run.attempt,
      claim_id: run.claimId,
      key,
      kind,
      questions,
    });
    interactionId = created.id;
  } catch (err) {
    if (isAppError(err) && err.code === 'already_settled') {
      // The run is being cancelled or was taken over; the poll tells which.
      void pollRun(run);
      return null;
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
        return { status: settlement.interaction.status, answers: settlement.answers };
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
  return null;
}
