import { describe, expect, it } from 'vitest';
import {
  AnswerEntry,
  AnswerRequest,
  AnswerResult,
  Interaction,
  InteractionList,
  InteractionListQuery,
  PublicAnswerEntry,
} from './interactions.js';

const at = '2025-05-01T10:00:00.000Z';

describe('AnswerEntry', () => {
  it('accepts options and text answers', () => {
    expect(AnswerEntry.parse({ kind: 'options', optionIds: ['README.md'] })).toEqual({
      kind: 'options',
      optionIds: ['README.md'],
    });
    expect(AnswerEntry.parse({ kind: 'text', text: 'hunter2' })).toEqual({ kind: 'text', text: 'hunter2' });
  });

  it('rejects redacted in requests, unknown kinds and malformed entries', () => {
    expect(AnswerEntry.safeParse({ kind: 'redacted' }).success).toBe(false);
    expect(AnswerEntry.safeParse({ kind: 'choice', optionIds: ['a'] }).success).toBe(false);
    expect(AnswerEntry.safeParse({ kind: 'options', optionIds: [] }).success).toBe(false);
    expect(AnswerEntry.safeParse({ kind: 'options', text: 'a' }).success).toBe(false);
    expect(AnswerEntry.safeParse({ kind: 'text', text: '' }).success).toBe(false);
    expect(AnswerEntry.safeParse({ kind: 'text', text: 'x'.repeat(4097) }).success).toBe(false);
  });

  it('allows redacted in responses', () => {
    expect(PublicAnswerEntry.parse({ kind: 'redacted' })).toEqual({ kind: 'redacted' });
  });
});

describe('AnswerRequest', () => {
  it('accepts the contract example', () => {
    const body = { answers: { q1: { kind: 'options', optionIds: ['README.md'] } }, action: 'answer' };
    expect(AnswerRequest.parse(body)).toEqual(body);
  });

  it('accepts cancel with no answers or an empty map', () => {
    expect(AnswerRequest.parse({ action: 'cancel' })).toEqual({ action: 'cancel' });
    expect(AnswerRequest.parse({ action: 'cancel', answers: {} })).toEqual({ action: 'cancel', answers: {} });
  });

  it('rejects answer without answers, cancel with answers, unknown actions and extra properties', () => {
    expect(AnswerRequest.safeParse({ action: 'answer' }).success).toBe(false);
    expect(AnswerRequest.safeParse({ action: 'answer', answers: {} }).success).toBe(false);
    expect(AnswerRequest.safeParse({ action: 'cancel', answers: { q1: { kind: 'text', text: 'x' } } }).success).toBe(
      false,
    );
    expect(AnswerRequest.safeParse({ action: 'skip', answers: {} }).success).toBe(false);
    expect(AnswerRequest.safeParse({ action: 'cancel', reason: 'x' }).success).toBe(false);
    expect(
      AnswerRequest.safeParse({ action: 'answer', answers: { ['k'.repeat(257)]: { kind: 'text', text: 'x' } } })
        .success,
    ).toBe(false);
  });
});

describe('AnswerResult', () => {
  it('accepts the contract example with a redacted secret', () => {
    const result = {
      interactionId: 'int_1',
      status: 'answered',
      cancelledBy: null,
      answers: { q1: { kind: 'options', optionIds: ['README.md'] }, q2: { kind: 'redacted' } },
      resolvedAt: at,
    };
    expect(AnswerResult.parse(result)).toEqual(result);
    expect(AnswerResult.parse({ ...result, status: 'cancelled', cancelledBy: 'user', answers: {} }).cancelledBy).toBe(
      'user',
    );
  });

  it('rejects unknown cancellers and a missing resolvedAt', () => {
    const result = { interactionId: 'int_1', status: 'cancelled', cancelledBy: 'admin', answers: {}, resolvedAt: at };
    expect(AnswerResult.safeParse(result).success).toBe(false);
    const { resolvedAt: _resolvedAt, ...withoutResolvedAt } = { ...result, cancelledBy: 'system' };
    expect(AnswerResult.safeParse(withoutResolvedAt).success).toBe(false);
  });
});

describe('Interaction', () => {
  const interaction = {
    id: 'int_1',
    run_id: 'run_1',
    thread_id: 'thr_1',
    kind: 'question',
    status: 'pending',
    questions: [
      {
        id: 'q1',
        header: 'File',
        question: 'Which file should I change?',
        isOther: false,
        isSecret: false,
        options: [
          { label: 'README.md', description: 'The readme' },
          { label: 'NOTES.md', description: 'The notes' },
        ],
      },
    ],
    answers: {},
    created_at: at,
    resolvedAt: null,
    cancelledBy: null,
  };

  it('accepts a pending question and lists of them', () => {
    expect(Interaction.parse(interaction)).toEqual(interaction);
    expect(InteractionList.parse({ interactions: [interaction] })).toEqual({ interactions: [interaction] });
  });

  it('rejects unknown kinds and questions without the harness flags', () => {
    expect(Interaction.safeParse({ ...interaction, kind: 'approval' }).success).toBe(false);
    const [question] = interaction.questions;
    const { isSecret: _isSecret, ...withoutSecret } = question!;
    expect(Interaction.safeParse({ ...interaction, questions: [withoutSecret] }).success).toBe(false);
  });

  it('filters lists by an optional status', () => {
    expect(InteractionListQuery.parse({ status: 'pending' })).toEqual({ status: 'pending' });
    expect(InteractionListQuery.parse({})).toEqual({});
    expect(InteractionListQuery.safeParse({ status: 'open' }).success).toBe(false);
  });
});
