import type { AnswerEntry, AnswerMap, PublicAnswerMap, Question } from '@threadwork/contracts';

// Pure rules of an interaction's answers: what a valid answer is and what leaves the service.

export type AnswerCheck = { ok: true } | { ok: false; message: string; question_id?: string };

/**
 * Checks answers against the questions they answer. Every key must be a question of this
 * interaction. An options answer names option labels (harnesses identify options by label); a
 * question with `isOther` also takes a label of the caller's own. A text answer fits a question
 * without options, an `isOther` one, or a secret one. Unanswered questions are allowed: the
 * harness decides what a missing answer means.
 */
export function checkAnswers(questions: readonly Question[], answers: AnswerMap): AnswerCheck {
  const byId = new Map(questions.map((q) => [q.id, q]));
  for (const [questionId, answer] of Object.entries(answers)) {
    const question = byId.get(questionId);
    if (!question)
      return { ok: false, message: `no question ${questionId} in this interaction`, question_id: questionId };
    const problem = checkAnswer(question, answer);
    if (problem) return { ok: false, message: problem, question_id: questionId };
  }
  return { ok: true };
}

function checkAnswer(question: Question, answer: AnswerEntry): string | null {
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
  answers: Readonly<Record<string, AnswerEntry>>,
): PublicAnswerMap {
  const secret = new Set(questions.filter((q) => q.isSecret).map((q) => q.id));
  const out: PublicAnswerMap = {};
  for (const [questionId, answer] of Object.entries(answers)) {
    out[questionId] = secret.has(questionId) ? { kind: 'redacted' } : answer;
  }
  return out;
}
