import { describe, expect, it } from 'vitest';
import { ERROR_CODES, ErrorBody, HTTP_STATUS_BY_CODE, UnauthorizedBody } from './errors.js';

describe('error codes', () => {
  it('map to the documented HTTP statuses', () => {
    expect(ERROR_CODES.map((code) => [code, HTTP_STATUS_BY_CODE[code]])).toEqual([
      ['invalid_request', 400],
      ['not_found', 404],
      ['thread_busy', 409],
      ['no_active_run', 409],
      ['already_settled', 409],
      ['idempotency_conflict', 409],
      ['too_many_runs', 409],
      ['too_many_api_keys', 409],
      ['payload_too_large', 413],
      ['rate_limited', 429],
      ['too_many_streams', 429],
      ['unavailable', 503],
      ['internal', 500],
      ['unauthorized', 401],
      ['forbidden', 403],
    ]);
  });
});

describe('error bodies', () => {
  it('accept {error: {code, message}}', () => {
    const body = { error: { code: 'thread_busy', message: 'use queue or steer' } };
    expect(ErrorBody.parse(body)).toEqual(body);
  });

  it('reject unknown codes and the bare-string form', () => {
    expect(ErrorBody.safeParse({ error: { code: 'teapot', message: 'x' } }).success).toBe(false);
    expect(ErrorBody.safeParse({ error: { code: 'internal' } }).success).toBe(false);
    expect(ErrorBody.safeParse({ error: 'Unauthorized' }).success).toBe(false);
  });

  it('keep 401 as {error: "Unauthorized"}', () => {
    expect(UnauthorizedBody.parse({ error: 'Unauthorized' })).toEqual({ error: 'Unauthorized' });
    expect(UnauthorizedBody.safeParse({ error: 'unauthorized' }).success).toBe(false);
    expect(UnauthorizedBody.safeParse({ error: { code: 'unauthorized', message: 'no key' } }).success).toBe(false);
  });
});
