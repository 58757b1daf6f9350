import type {
  AnswerMap,
  InteractionAnswerEntry,
  InteractionKind,
  PublicAnswerMap,
  Question,
} from '@threadwork/contracts';

// Pure rules of an interaction's answers: what a valid answer is and what leaves the service.

export type AnswerCheck = { ok: true } | { ok: false; message: string; question_id?: string };

/**
 * Checks answers against the interaction they answer. Every key must be a question of this
 * interaction. A `plan_approval` (its one question is the plan) takes exactly one answer, approve
 * or reject, to that question. A `question` interaction takes options and text: an options answer
 * names option labels (harnesses identify options by label); a question with `isOther` also takes
 * a label of the caller's own; a text answer fits a question without options, an `isOther` one, or
 * a secret one. Unanswered questions are allowed there: the harness decides what a missing answer
 * means.
 */
export function checkAnswers(
  questions: readonly Question[],
  answers: AnswerMap,
  kind: InteractionKind = 'question',
): AnswerCheck {
  const byId = new Map(questions.map((q) => [q.id, q]));
  for (const [questionId, answer] of Object.entries(answers)) {
    const question = byId.get(questionId);
    if (!question)
      return { ok: false, message: `no question ${questionId} in this interaction`, question_id: questionId };
    const problem = kind === 'plan_approval' ? checkPlanAnswer(question, answer) : checkAnswer(question, answer);
    if (problem) return { ok: false, message: problem, question_id: questionId };
  }
  if (kind === 'plan_approval' && Object.keys(answers).length !== 1) {
    return { ok: false, message: 'a plan approval takes one answer: approve or reject' };
  }
  return { ok: true };
}

function checkPlanAnswer(question: Question, answer: InteractionAnswerEntry): string | null {
  if (answer.kind === 'approve' || answer.kind === 'reject') return null;
  return `question ${question.id} is a plan approval: answer it with approve or reject`;
}

function checkAnswer(question: Question, answer: InteractionAnswerEntry): string | null {
  if (answer.kind === 'approve' || answer.kind === 'reject') {
    return `question ${question.id} takes options or text: approve and reject answer a plan approval`;
  }
  if (answer.kind === 'options') {
    if (question.isOther) return null;
    const labels = new Set(question.options.map((o) => o.label));
    const unknown = answer.optionIds.find((id) => !labels.has(id));
    return unknown === undefined ? null : `${JSON.stringify(unknown)} is not an option of question ${question.id}`;
  }
  if (question.options.length === 0 || question.isOther || question.isSecret) return null;
  return `question ${question.id} takes one of its options`;
}

/** Answers as they leave the service: a secret question's answer becomes `{kind: 'redacted'}`. */
export function redactAnswers(
  questions: readonly Question[],
  answers: Readonly<Record<string, InteractionAnswerEntry>>,
): PublicAnswerMap {
  const secret = new Set(questions.filter((q) => q.isSecret).map((q) => q.id));
  const out: PublicAnswerMap = {};
  for (const [questionId, answer] of Object.entries(answers)) {
    out[questionId] = secret.has(questionId) ? { kind: 'redacted' } : answer;
  }
  return out;
}
