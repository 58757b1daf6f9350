import type { Question } from '@threadwork/contracts';
import { describe, expect, it } from 'vitest';
import { checkAnswers, redactAnswers } from './interactions.js';

const pick: Question = {
  id: 'file',
  header: 'File',
  question: 'Which file should I change?',
  isOther: false,
  isSecret: false,
  options: [
    { label: 'README.md', description: '' },
    { label: 'NOTES.md', description: '' },
  ],
};
const other: Question = { ...pick, id: 'other', isOther: true };
const free: Question = { ...pick, id: 'free', options: [] };
const secret: Question = { ...pick, id: 'token', isSecret: true, options: [] };
const questions = [pick, other, free, secret];

describe('answer checks', () => {
  it('accepts option labels, free text and secrets where they fit', () => {
    expect(
      checkAnswers(questions, {
        file: { kind: 'options', optionIds: ['NOTES.md'] },
        other: { kind: 'options', optionIds: ['something else'] },
        free: { kind: 'text', text: 'anything' },
        token: { kind: 'text', text: 's3cret' },
      }),
    ).toEqual({ ok: true });
  });

  it('rejects an unknown question id', () => {
    expect(checkAnswers(questions, { nope: { kind: 'text', text: 'x' } })).toMatchObject({
      ok: false,
      question_id: 'nope',
    });
  });

  it('rejects an option that is not a label of the question', () => {
    expect(checkAnswers(questions, { file: { kind: 'options', optionIds: ['README.md', 'x.md'] } })).toMatchObject({
      ok: false,
      question_id: 'file',
      message: expect.stringContaining('x.md'),
    });
  });

  it('rejects free text for a question that only takes its options', () => {
    expect(checkAnswers(questions, { file: { kind: 'text', text: 'README.md' } })).toMatchObject({ ok: false });
    expect(checkAnswers(questions, { other: { kind: 'text', text: 'mine' } })).toEqual({ ok: true });
  });
});

describe('redaction', () => {
  it('redacts answers to secret questions only', () => {
    expect(
      redactAnswers(questions, {
        file: { kind: 'options', optionIds: ['README.md'] },
        token: { kind: 'text', text: 's3cret' },
      }),
    ).toEqual({ file: { kind: 'options', optionIds: ['README.md'] }, token: { kind: 'redacted' } });
  });
});

describe('plan approval answers', () => {
  const plan: Question = { ...free, id: 'plan', header: 'Plan', question: '1. Edit README.md\n2. Run the tests' };

  it('takes approve, or reject with or without a comment, on its one question', () => {
    for (const answer of [{ kind: 'approve' }, { kind: 'reject' }, { kind: 'reject', text: 'Test first' }] as const) {
      expect(checkAnswers([plan], { plan: answer }, 'plan_approval')).toEqual({ ok: true });
    }
  });

  it('refuses options or text on a plan, and approve or reject on a question', () => {
    expect(checkAnswers([plan], { plan: { kind: 'text', text: 'ok' } }, 'plan_approval')).toMatchObject({
      ok: false,
      question_id: 'plan',
      message: expect.stringContaining('approve or reject'),
    });
    expect(checkAnswers(questions, { free: { kind: 'approve' } })).toMatchObject({
      ok: false,
      question_id: 'free',
      message: expect.stringContaining('approve and reject answer a plan approval'),
    });
  });

  it('refuses a question the plan approval does not have', () => {
    expect(checkAnswers([plan], { other: { kind: 'approve' } }, 'plan_approval')).toMatchObject({
      ok: false,
      question_id: 'other',
    });
  });
});
