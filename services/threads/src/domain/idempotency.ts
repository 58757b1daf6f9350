import { createHash } from 'node:crypto';

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * JSON with object keys sorted and `undefined` members dropped, so two bodies that mean the same
 * thing hash the same whatever order the caller wrote their fields in.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const members = Object.entries(value as Record<string, unknown>)
      .filter(([, member]) => member !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([key, member]) => `${JSON.stringify(key)}:${canonicalJson(member)}`);
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value);
}

/** What a `client_request_id` is bound to: a replay must carry the same request to get the same answer. */
export function requestHash(value: unknown): string {
  return sha256(canonicalJson(value));
}

/** The idempotency record of one caller's `client_request_id` for one operation. */
export function requestKey(ownerId: string, op: 'create' | 'message' | 'queue' | 'steer', clientRequestId: string) {
  return `${ownerId}:${op}:${clientRequestId}`;
}

/**
 * The admission key of the run a message starts. Message ids may come from the caller and are
 * unique only within their thread, while the runs service dedupes admissions by key; deriving the
 * key from (thread, message) keeps two callers' `message_id: "1"` from sharing one run.
 */
export function messageAdmissionKey(threadId: string, messageId: string): string {
  return `adm_${sha256(`${threadId}\n${messageId}`).slice(0, 40)}`;
}

/** The public id of an assistant reply, stable per `message_key` so a redelivered event stores one message. */
export function assistantMessageId(messageKey: string): string {
  return `msg_${sha256(messageKey).slice(0, 32)}`;
}
