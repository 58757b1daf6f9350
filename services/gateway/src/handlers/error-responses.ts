import { ErrorBody, UnauthorizedBody } from '@threadwork/contracts';

const errorResponses = {
  400: ErrorBody.describe('Invalid request: `error.message` names the offending field (`body.prompt: …`)'),
  401: UnauthorizedBody.describe('Missing or invalid API key or session'),
  404: ErrorBody.describe("No such resource for this caller (others' resources are reported the same way)"),
  429: ErrorBody.describe(
    '`rate_limited`: too many requests (per caller, per gateway replica; for thread and task creation THREADS_PER_MINUTE_PER_USER), `Retry-After` says when to retry. `too_many_streams`: the caller already holds MAX_FOLLOWERS_PER_USER event streams and long-polls open on this replica; close one, or retry after `Retry-After`',
  ),
  500: ErrorBody.describe('Unexpected failure; the message never carries details'),
  503: ErrorBody.describe('A backing service did not answer in time; retry'),
};
const payloadTooLarge = { 413: ErrorBody.describe('Request body larger than the limit (1 MiB by default)') };
const conflictResponse = {
  409: ErrorBody.describe(
    'Conflict: `thread_busy`, `no_active_run`, `already_settled`, `idempotency_conflict` or `too_many_runs` (the caller has MAX_LIVE_RUNS_PER_USER runs live; nothing was written) (see `error.code`)',
  ),
};

/** Error responses of a read. */
export const readErrors = errorResponses;
/** Error responses of a write with a JSON body. */
export const writeErrors = { ...errorResponses, ...payloadTooLarge };
/** Error responses of a write that can conflict with the resource's state. */
export const conflictingWriteErrors = { ...writeErrors, ...conflictResponse };
/** The 429 of an unauthenticated path, limited per client address instead of per caller. */
export const tooManyFromAddress = ErrorBody.describe(
  'Too many requests from this client address (PUBLIC_RATE_LIMIT_PER_SECOND, PUBLIC_RATE_LIMIT_BURST, per gateway replica); `Retry-After` says when to retry',
);
