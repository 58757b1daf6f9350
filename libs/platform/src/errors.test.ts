import { describe, expect, it } from 'vitest';
import { AppError, toAppError } from './errors.js';

describe('AppError', () => {
  it('knows which codes are worth retrying', () => {
    expect(new AppError('unavailable', 'x').retryable).toBe(true);
    expect(new AppError('rate_limited', 'x').retryable).toBe(true);
    expect(new AppError('not_found', 'x').retryable).toBe(false);
    expect(new AppError('not_found', 'x', { retryable: true }).retryable).toBe(true);
  });

  it('survives a round trip through JSON', () => {
    const original = new AppError('thread_busy', 'a run is active', { details: { run_id: 'r1' } });
    const copy = AppError.fromJSON(JSON.parse(JSON.stringify(original)));
    expect(copy).toBeInstanceOf(AppError);
    expect(copy.code).toBe('thread_busy');
    expect(copy.message).toBe('a run is active');
    expect(copy.details).toEqual({ run_id: 'r1' });
  });

  it('hides the message of anything that is not an AppError', () => {
    const err = toAppError(new Error('connection string mongodb://user:secret@host'));
    expect(err.code).toBe('internal');
    expect(err.message).toBe('internal error');
    expect(JSON.stringify(err.toJSON())).not.toContain('secret');
  });
});
