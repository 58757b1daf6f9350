import { z } from 'zod';
import { Id, PROMPT_MAX_LENGTH, Timestamp, optionalQueryParam } from '../common.js';
import { CancelledBy, InteractionKind, InteractionStatus } from '../values.js';

export const QuestionOption = z.object({
  label: z.string(),
  description: z.string(),
});
export type QuestionOption = z.infer<typeof QuestionOption>;

/**
 * Mirrors the agent harness's question (Codex `request_user_input`) so adapters map it 1:1.
 * `options` is empty for a free-text question; `isSecret` answers are redacted on the way out.
 */
export const Question = z.object({
  id: Id,
  header: z.string(),
  question: z.string(),
  isOther: z.boolean(),
  isSecret: z.boolean(),
  options: z.array(QuestionOption),
});
export type Question = z.infer<typeof Question>;

/** Harnesses identify an option by its label, so option ids are option labels. */
export const OptionsAnswer = z.object({
  kind: z.literal('options'),
  optionIds: z.array(Id).min(1),
});
export type OptionsAnswer = z.infer<typeof OptionsAnswer>;

/** Free text or a secret; bounded like a prompt because it lands in the same model context. */
export const TextAnswer = z.object({
  kind: z.literal('text'),
  text: z.string().min(1).max(PROMPT_MAX_LENGTH),
});
export type TextAnswer = z.infer<typeof TextAnswer>;

/** An answer to a `question` interaction's question: the options chosen or the text typed. */
export const AnswerEntry = z.discriminatedUnion('kind', [OptionsAnswer, TextAnswer]);
export type AnswerEntry = z.infer<typeof AnswerEntry>;

/** Accepts the plan of a `plan_approval` interaction: the turn carries on in the default mode and carries it out. */
export const ApproveAnswer = z
  .strictObject({ kind: z.literal('approve') })
  .describe('Accepts the plan of a `plan_approval` interaction: the turn carries on in the default mode.');
export type ApproveAnswer = z.infer<typeof ApproveAnswer>;

/** Turns the plan down; the agent revises it (along `text`, bounded like a prompt) and asks again. */
export const RejectAnswer = z
  .strictObject({ kind: z.literal('reject'), text: z.string().min(1).max(PROMPT_MAX_LENGTH).optional() })
  .describe(
    'Turns the plan of a `plan_approval` interaction down: the agent revises it, following `text` when given, and asks again.',
  );
export type RejectAnswer = z.infer<typeof RejectAnswer>;

/** An answer to a `plan_approval` interaction's one question (the plan). */
export const PlanAnswerEntry = z.discriminatedUnion('kind', [ApproveAnswer, RejectAnswer]);
export type PlanAnswerEntry = z.infer<typeof PlanAnswerEntry>;

/**
 * Any answer to one question: `options` or `text` for a `question` interaction, `approve` or
 * `reject` for a `plan_approval` one.
 */
export const InteractionAnswerEntry = z
  .discriminatedUnion('kind', [OptionsAnswer, TextAnswer, ApproveAnswer, RejectAnswer])
  .describe(
    'An answer to one question: `options` or `text` for a `question` interaction; `approve` or `reject` (with an optional `text`) for a `plan_approval` one.',
  );
export type InteractionAnswerEntry = z.infer<typeof InteractionAnswerEntry>;

/** Stands in for the answer to an `isSecret` question in every response. */
export const RedactedAnswer = z.object({
  kind: z.literal('redacted'),
});
export type RedactedAnswer = z.infer<typeof RedactedAnswer>;

/** An answer as responses show it: as given, or redacted. */
export const PublicAnswerEntry = z.discriminatedUnion('kind', [
  OptionsAnswer,
  TextAnswer,
  ApproveAnswer,
  RejectAnswer,
  RedactedAnswer,
]);
export type PublicAnswerEntry = z.infer<typeof PublicAnswerEntry>;

/** Keyed by question id. */
export const AnswerMap = z
  .record(Id, InteractionAnswerEntry)
  .describe(
    'Answers by question id. A `question` interaction takes `options` or `text` entries (unanswered questions allowed); a `plan_approval` takes exactly one entry for its one question (the plan): `approve` (the turn continues in the default mode) or `reject` with an optional `text` (the agent revises the plan).',
  );
export type AnswerMap = z.infer<typeof AnswerMap>;

export const PublicAnswerMap = z.record(Id, PublicAnswerEntry);
export type PublicAnswerMap = z.infer<typeof PublicAnswerMap>;

/**
 * POST /v1/interactions/{id}/answer, discriminated by `action`. `answer` needs at least one entry;
 * `cancel` takes no answers (absent or `{}`): answers sent with a cancel would be contradictory, and
 * rejecting them beats silently dropping them.
 */
export const AnswerRequest = z.discriminatedUnion('action', [
  z.strictObject({
    action: z.literal('answer'),
    answers: AnswerMap.refine((answers) => Object.keys(answers).length > 0, {
      message: 'at least one answer is required',
    }),
  }),
  z.strictObject({
    action: z.literal('cancel'),
    answers: z.strictObject({}).optional(),
  }),
]);
export type AnswerRequest = z.infer<typeof AnswerRequest>;

export const AnswerResult = z.object({
  interactionId: Id,
  status: InteractionStatus,
  cancelledBy: CancelledBy.nullable(),
  answers: PublicAnswerMap,
  resolvedAt: Timestamp,
});
export type AnswerResult = z.infer<typeof AnswerResult>;

/** `answers` is `{}` until settled; `resolvedAt` and `cancelledBy` are null until then. */
export const Interaction = z.object({
  id: Id,
  run_id: Id,
  thread_id: Id,
  kind: InteractionKind.describe(
    '`question`: the agent asks; `plan_approval`: the agent proposes a plan, carried as the `question` of the one question, and waits for approve or reject.',
  ),
  status: InteractionStatus,
  questions: z.array(Question),
  answers: PublicAnswerMap,
  created_at: Timestamp,
  resolvedAt: Timestamp.nullable(),
  cancelledBy: CancelledBy.nullable(),
});
export type Interaction = z.infer<typeof Interaction>;

/** GET /v1/threads/{id}/interactions */
export const InteractionList = z.object({
  interactions: z.array(Interaction),
});
export type InteractionList = z.infer<typeof InteractionList>;

export const InteractionListQuery = z.object({
  status: optionalQueryParam(InteractionStatus.optional()),
});
export type InteractionListQuery = z.infer<typeof InteractionListQuery>;
