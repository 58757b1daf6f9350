import { isDeepStrictEqual } from 'node:util';
import {
  subjects,
  type AnswerRequest,
  type AnswerResult,
  type InteractionCreateRequest,
  type InteractionStatus,
} from '@threadwork/contracts';
import { conflict, invalidRequest, isDuplicateKeyError, notFound, publishSignal } from '@threadwork/platform';
import type { z } from 'zod';
import { checkAnswers, redactAnswers } from '../domain/interactions.js';
import { newId } from '../domain/ids.js';
import { settledDoc, type InteractionDoc, type SettlementDoc } from '../store/interactions.js';
import type { RunsContext } from './context.js';
import { appendWhileLive } from './announce.js';
import { applySettlement, requestedEntry } from './finish.js';
import { moveRun } from './lifecycle.js';
import { fencedRun } from './runner-holder.js';

// Interactions: the runner raises one (the run waits for input), the user settles it exactly once
// (an insert into interaction_settlements decides), the runner reads the answers back.

/**
 * Raises an interaction for the runner holding the run's current attempt (by its claim); the harness's `key`
 * makes a retry return the same interaction. The run moves running → waiting_for_input and the
 * log gets an `interaction.requested` pointer (never the questions).
 */
export async function createInteraction(
  ctx: RunsContext,
  req: z.output<typeof InteractionCreateRequest>,
): Promise<InteractionDoc> {
  const run = await fencedRun(ctx, req.run_id, req.attempt, req.claim_id);
  if (run.terminal || run.status === 'cancelling') throw conflict('already_settled', `run ${run._id} is ${run.status}`);
  if (run.status !== 'running' && run.status !== 'waiting_for_input') {
    throw invalidRequest(`run ${run._id} is ${run.status}; only a running run asks for input`);
  }
  const ids = req.questions.map((q) => q.id);
  if (new Set(ids).size !== ids.length) throw invalidRequest('question ids must be unique');

  let doc: InteractionDoc = {
    _id: newId('int'),
    run_id: run._id,
    thread_id: run.thread_id,
    owner_id: run.owner_id,
    key: req.key,
    kind: req.kind,
    questions: req.questions,
    status: 'pending',
    answers: {},
    cancelled_by: null,
    created_at: new Date(),
    resolved_at: null,
    announced: false,
  };
  try {
    await ctx.interactions.insertInteraction(doc);
  } catch (err) {
    if (!isDuplicateKeyError(err)) throw err;
    const existing = await ctx.interactions.interactionOfKey(run._id, req.key);
    if (!existing) throw err;
    // A retry asks the same again; the same key with other questions is not one, and must not
    // come back with the answers (an approval) given to the first.
    if (existing.kind !== req.kind || !isDeepStrictEqual(existing.questions, req.questions)) {
      throw conflict(
        'idempotency_conflict',
        `interaction ${req.key} of run ${run._id} was raised with other questions`,
      );
    }
    doc = (await ctx.interactions.withSettlements([existing]))[0] ?? existing;
  }

  if (doc.status === 'pending' && run.status === 'running') {
    await moveRun(ctx, run, 'waiting_for_input', { cause: `interaction:${doc._id}` });
  }
  // Conditional like the runner's own events: a cancel that ended the run meanwhile keeps its
  // terminal event last (the run's end logged the question with its cancellation, if at all).
  await appendWhileLive(ctx, run._id, [requestedEntry(doc)]);
  if (doc.announced === false) {
    await ctx.interactions.markAnnounced(doc._id);
    doc = { ...doc, announced: true };
  }
  return doc;
}

export async function getInteraction(
  ctx: RunsContext,
  interactionId: string,
  ownerId: string,
): Promise<InteractionDoc> {
  const doc = await ctx.interactions.interaction(interactionId);
  if (!doc || doc.owner_id !== ownerId) throw notFound('interaction');
  const [current] = await ctx.interactions.withSettlements([doc]);
  return current ?? doc;
}

/** A thread's interactions, oldest first, optionally only those in one status. */
export async function listInteractions(
  ctx: RunsContext,
  ownerId: string,
  threadId: string,
  status: InteractionStatus | undefined,
): Promise<InteractionDoc[]> {
  const docs = await ctx.interactions.threadInteractions(ownerId, threadId);
  const current = await ctx.interactions.withSettlements(docs);
  return status ? current.filter((d) => d.status === status) : current;
}

/**
 * Settles an interaction for its owner, exactly once: the first insert into
 * interaction_settlements wins; a second answer (or a loser of a race) gets `already_settled`.
 * Then the interaction is updated, the settlement logged, the run resumed if nothing else is
 * pending, and the runner signalled — after the durable writes.
 */
export async function answerInteraction(
  ctx: RunsContext,
  ownerId: string,
  interactionId: string,
  request: AnswerRequest,
): Promise<AnswerResult> {
  const doc = await getInteraction(ctx, interactionId, ownerId);
  if (doc.status !== 'pending') throw conflict('already_settled', `interaction ${doc._id} is already ${doc.status}`);

  const now = new Date();
  let settlement: SettlementDoc;
  if (request.action === 'answer') {
    const check = checkAnswers(doc.questions, request.answers, doc.kind);
    if (!check.ok) throw invalidRequest(check.message, check.question_id ? { question_id: check.question_id } : {});
    settlement = { _id: doc._id, status: 'answered', answers: request.answers, cancelled_by: null, resolved_at: now };
  } else {
    settlement = { _id: doc._id, status: 'cancelled', answers: {}, cancelled_by: 'user', resolved_at: now };
  }

  try {
    await ctx.interactions.insertSettlement(settlement);
  } catch (err) {
    if (isDuplicateKeyError(err)) throw conflict('already_settled', `interaction ${doc._id} is already settled`);
    throw err;
  }
  await completeSettlement(ctx, doc, settlement);
  return {
    interactionId: doc._id,
    status: settlement.status,
    cancelledBy: settlement.cancelled_by,
    answers: redactAnswers(doc.questions, settlement.answers),
    resolvedAt: settlement.resolved_at.toISOString(),
  };
}

/**
 * What the runner reads after an `interaction` signal (or on its next look): the interaction and
 * its answers in clear. A settlement whose follow-up writes were interrupted is finished here,
 * so a crash between the settlement and its follow-ups cannot leave the run waiting forever.
 */
export async function readSettlement(
  ctx: RunsContext,
  interactionId: string,
  runId: string,
): Promise<{ doc: InteractionDoc; answers: SettlementDoc['answers'] }> {
  const doc = await ctx.interactions.interaction(interactionId);
  // Another run's question is none of this caller's business: as if it did not exist.
  if (!doc || doc.run_id !== runId) throw notFound('interaction');
  const settlement = await ctx.interactions.settlement(interactionId);
  if (!settlement) return { doc, answers: {} };
  if (doc.status === 'pending') await completeSettlement(ctx, doc, settlement);
  return { doc: settledDoc(doc, settlement), answers: settlement.answers };
}

async function completeSettlement(ctx: RunsContext, doc: InteractionDoc, settlement: SettlementDoc): Promise<void> {
  await applySettlement(ctx, doc, settlement);
  const run = await ctx.store.run(doc.run_id);
  if (run && run.status === 'waiting_for_input' && !run.terminal) {
    const others = await ctx.interactions.withSettlements(await ctx.interactions.pendingOfRun(run._id));
    if (!others.some((o) => o.status === 'pending')) {
      await moveRun(ctx, run, 'running', { cause: `settled:${doc._id}` });
    }
  }
  publishSignal(ctx.nc, subjects.runSignal(doc.run_id), { type: 'interaction', interaction_id: doc._id });
}
