import { z } from 'zod';

/** The closed set of `error.code` values the public API answers with (DESIGN.md section 4). */
export const ErrorCode = z.enum([
  'invalid_request',
  'not_found',
  'thread_busy',
  'no_active_run',
  'already_settled',
  'idempotency_conflict',
  'too_many_runs',
  'too_many_api_keys',
  'payload_too_large',
  'rate_limited',
  'too_many_streams',
  'unavailable',
  'internal',
  'unauthorized',
  'forbidden',
]);
export type ErrorCode = z.infer<typeof ErrorCode>;
export const ERROR_CODES = ErrorCode.options;

/**
 * One place decides the HTTP status of a code, so the gateway's error handler and the services
 * that raise typed errors cannot disagree. The six conflicts share 409 and differ only by code.
 */
export const HTTP_STATUS_BY_CODE = {
  invalid_request: 400,
  not_found: 404,
  thread_busy: 409,
  no_active_run: 409,
  already_settled: 409,
  idempotency_conflict: 409,
  too_many_runs: 409,
  too_many_api_keys: 409,
  payload_too_large: 413,
  rate_limited: 429,
  too_many_streams: 429,
  unavailable: 503,
  internal: 500,
  unauthorized: 401,
  forbidden: 403,
} as const satisfies Record<ErrorCode, number>;

export const ErrorBody = z.object({
  error: z.object({
    code: ErrorCode,
    message: z.string(),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

/** The contract keeps the 401 body a bare string, unlike every other error. */
export const UnauthorizedBody = z.object({
  error: z.literal('Unauthorized'),
});
export type UnauthorizedBody = z.infer<typeof UnauthorizedBody>;
