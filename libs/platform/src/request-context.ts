import { AsyncLocalStorage } from 'node:async_hooks';

// The id of the API request being served, carried from the gateway (fastify's request id, which
// it also answers in `X-Request-Id`) through every service it calls, in a NATS header. Every log
// line written while serving it carries `request_id`, so what a client was told only as a code
// (GitHub's own error text, an internal failure) is found in any service's log by that id.

/** The NATS header that carries the request id between services. */
export const REQUEST_ID_HEADER = 'Tw-Request-Id';

/** Ids we accept from a header: what the gateway makes (a UUID), nothing that could forge a log line. */
const REQUEST_ID = /^[A-Za-z0-9_-]{1,64}$/;

const storage = new AsyncLocalStorage<{ requestId: string }>();

/** The id of the request this code runs for, if any. */
export function currentRequestId(): string | undefined {
  return storage.getStore()?.requestId;
}

/** Runs `fn` (and everything it starts) as serving the request `requestId`; an unusable id is none. */
export function withRequestId<T>(requestId: string | undefined | null, fn: () => T): T {
  if (!requestId || !REQUEST_ID.test(requestId)) return fn();
  return storage.run({ requestId }, fn);
}
